package ship

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/transport"
)

// Auth says how a sender proves who it is and which receiver it trusts. Both
// senders take the client it makes (OTLPOptions.Client, LokiOptions.Client).
type Auth struct {
	// TokenFile holds a bearer token sent as "Authorization: Bearer <token>" on
	// every request: a projected ServiceAccount token with the collector's
	// audience. The file is re-read (at most a minute late) so a token the kubelet
	// rotated is picked up without a restart.
	TokenFile string
	// CAFile holds the PEM certificates that verify the receiver's TLS
	// certificate (an https:// endpoint); empty: the system roots.
	CAFile string
}

// Client returns an HTTP client that adds the token and verifies the receiver
// with the CA file, or nil when neither is set (the senders' default client).
// It fails when a file cannot be read, so a missing token stops the start.
func (a Auth) Client() (*http.Client, error) {
	if a.TokenFile == "" && a.CAFile == "" {
		return nil, nil
	}
	rt, err := transport.New(&transport.Config{
		BearerTokenFile: a.TokenFile,
		TLS:             transport.TLSConfig{CAFile: a.CAFile},
	})
	if err != nil {
		return nil, fmt.Errorf("receiver credentials (token file %q, CA file %q): %w", a.TokenFile, a.CAFile, err)
	}
	return &http.Client{Transport: rt}, nil
}
