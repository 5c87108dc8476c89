package testenv

import (
	"os"
	"path/filepath"

	"k8s.io/client-go/util/cert"
)

// TLSFiles are a CA and a serving certificate it signed, as PEM files.
type TLSFiles struct{ CA, Cert, Key string }

// WriteTLS writes a fresh CA (ca.crt) and a serving certificate (tls.crt, tls.key)
// for names, the first one its common name, into dir, as the chart's Secrets hold them.
func WriteTLS(t TB, dir string, names ...string) TLSFiles {
	t.Helper()
	// client-go's generator returns the certificate, then the CA that signed it.
	chain, key, err := cert.GenerateSelfSignedCertKey(names[0], nil, names[1:])
	if err != nil {
		t.Fatal(err)
	}
	certs, err := cert.ParseCertsPEM(chain)
	if err != nil || len(certs) != 2 || !certs[1].IsCA {
		t.Fatalf("testenv: want a certificate and its CA, have %d (%v)", len(certs), err)
	}
	caPEM, err := cert.EncodeCertificates(certs[1])
	if err != nil {
		t.Fatal(err)
	}
	leafPEM, err := cert.EncodeCertificates(certs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f := TLSFiles{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
	for p, b := range map[string][]byte{f.CA: caPEM, f.Cert: leafPEM, f.Key: key} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
