package agent_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/active-probes/agent"
	"github.com/faultline-dev/faultline/test/testenv"
)

// serving returns the common name of the certificate conf serves, without the
// generator's "@<time>" suffix.
func serving(t *testing.T, conf *tls.Config) string {
	t.Helper()
	c, err := conf.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	cn, _, _ := strings.Cut(leaf.Subject.CommonName, "@")
	return cn
}

// A renewed certificate (the Secret volume changing in place) is served without a
// restart; a half-written renewal keeps the previous one; a missing pair is an
// error at start.
func TestServerTLSReload(t *testing.T) {
	agent.SetCertReload(t, 10*time.Millisecond)
	dir := t.TempDir()
	live := testenv.WriteTLS(t, filepath.Join(dir, "live"), "first.faultline.svc")
	renewed := testenv.WriteTLS(t, filepath.Join(dir, "renewed"), "second.faultline.svc")
	conf, err := agent.ServerTLS(live.Cert, live.Key)
	if err != nil {
		t.Fatal(err)
	}
	if conf.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion %x", conf.MinVersion)
	}
	if cn := serving(t, conf); cn != "first.faultline.svc" {
		t.Fatalf("serves %s", cn)
	}
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Half a renewal: the new certificate, the old key. The old pair stays.
	copyFile(renewed.Cert, live.Cert)
	time.Sleep(20 * time.Millisecond)
	if cn := serving(t, conf); cn != "first.faultline.svc" {
		t.Errorf("a mismatched pair replaced the served one: %s", cn)
	}
	// The whole renewal: served at the next read.
	copyFile(renewed.Key, live.Key)
	time.Sleep(20 * time.Millisecond)
	if cn := serving(t, conf); cn != "second.faultline.svc" {
		t.Errorf("after the renewal, serves %s", cn)
	}
	if _, err := agent.ServerTLS(filepath.Join(dir, "none.crt"), live.Key); err == nil || !strings.Contains(err.Error(), "none.crt") {
		t.Errorf("a missing certificate: %v", err)
	}
}
