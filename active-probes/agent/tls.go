package agent

import (
	"crypto/tls"
	"fmt"
	"sync"
	"time"
)

// certReload is how often the serving certificate is read again: a Secret volume
// changes in place when the certificate is renewed, and the agent must not need a
// restart to serve the new one.
var certReload = time.Minute

// ServerTLS returns the agent's TLS configuration: the key pair in certFile and
// keyFile (read again at most every minute, and kept when a read fails), TLS 1.2 or
// later. The controller's bearer token only ever reaches a listener that holds it.
func ServerTLS(certFile, keyFile string) (*tls.Config, error) {
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	if err := kp.load(); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: kp.get}, nil
}

type keyPair struct {
	certFile, keyFile string

	mu   sync.Mutex
	cert *tls.Certificate
	at   time.Time
}

func (k *keyPair) load() error {
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return fmt.Errorf("serving certificate %s, key %s: %w", k.certFile, k.keyFile, err)
	}
	k.mu.Lock()
	k.cert, k.at = &c, time.Now()
	k.mu.Unlock()
	return nil
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	stale := time.Since(k.at) > certReload
	if stale {
		k.at = time.Now() // one reload per interval, even when it fails
	}
	k.mu.Unlock()
	if stale {
		_ = k.load() // a half-written renewal keeps the previous pair
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cert, nil
}
