package agent

import (
	"crypto/tls"
	"time"

	"github.com/faultline-dev/faultline/certreload"
)

// certReload is how often the serving certificate is read again: a Secret volume
// changes in place when the certificate is renewed, and the agent must not need a
// restart to serve the new one.
var certReload = time.Minute

// ServerTLS returns the agent's TLS configuration: the key pair in certFile and
// keyFile (read again at most every minute, and kept when a read fails), TLS 1.2 or
// later. The controller's bearer token only ever reaches a listener that holds it.
func ServerTLS(certFile, keyFile string) (*tls.Config, error) {
	return certreload.ServerTLS(certFile, keyFile, certReload)
}
