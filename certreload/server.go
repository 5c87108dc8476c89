package certreload

import (
	"crypto/tls"
	"fmt"
	"time"
)

// ServerTLS is a listener's TLS configuration: the key pair in certFile and keyFile,
// read again at most every interval (and kept when a read fails), TLS 1.2 or later.
func ServerTLS(certFile, keyFile string, interval time.Duration) (*tls.Config, error) {
	kp, err := Load(interval, func() (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("serving certificate %s, key %s: %w", certFile, keyFile, err)
		}
		return &c, nil
	})
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return kp.Get(), nil
	}}, nil
}
