package agentcerts

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/faultline-dev/faultline/certreload"
)

// caReload is how often the CA files are read again: the chart mounts them from a
// Secret, which changes in place when the CA is replaced.
const caReload = time.Minute

// backdate is how far before its signing a certificate is valid (at most a tenth
// of its lifetime): a node's clock that lags the controller's must not see a fresh
// certificate as not yet valid, and the agent's renewal, due at 70 to 90% of the
// whole validity, must stay after the signing.
const backdate = time.Minute

// CA is the key pair that signs the agents' certificates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// LoadCA reads the CA's certificate and key (PEM) and reads them again at most every
// minute; a failed read keeps the previous pair.
func LoadCA(certFile, keyFile string) (*certreload.Value[*CA], error) {
	return certreload.Load(caReload, func() (*CA, error) { return readCA(certFile, keyFile) })
}

func readCA(certFile, keyFile string) (*CA, error) {
	certs, err := cert.CertsFromFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("signer CA certificate: %w", err)
	}
	key, err := keyutil.PrivateKeyFromFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("signer CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("signer CA key %s: a %T cannot sign", keyFile, key)
	}
	ca := certs[0]
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("signer CA certificate %s: not a CA that may sign certificates", certFile)
	}
	pub, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		return nil, fmt.Errorf("signer CA key %s: %w", keyFile, err)
	}
	if caPub, err := x509.MarshalPKIXPublicKey(ca.PublicKey); err != nil || !bytes.Equal(pub, caPub) {
		return nil, errors.New("signer CA: the key in " + keyFile + " is not the key of " + certFile)
	}
	return &CA{Cert: ca, Key: signer}, nil
}

// sign issues the server certificate of req for its one DNS name, valid for
// lifetime from now (backdated) and never past the CA's own end.
func (ca *CA) sign(req *x509.CertificateRequest, usages x509.KeyUsage, lifetime time.Duration, now time.Time) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	notAfter := now.Add(lifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.Subject.CommonName},
		DNSNames:              req.DNSNames,
		NotBefore:             now.Add(-min(backdate, lifetime/10)),
		NotAfter:              notAfter,
		KeyUsage:              usages,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return cert.EncodeCertificates(c)
}
