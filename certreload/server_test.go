package certreload_test

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/faultline-dev/faultline/certreload"
	"github.com/faultline-dev/faultline/test/testenv"
)

// A listener on ServerTLS serves its key pair over TLS 1.2 or later and refuses
// older versions; a missing pair is an error at start. (Renewals: the agent's
// TestServerTLSReload.)
func TestServerTLS(t *testing.T) {
	dir := t.TempDir()
	pair := testenv.WriteTLS(t, filepath.Join(dir, "pair"), "status.faultline.svc")
	conf, err := certreload.ServerTLS(pair.Cert, pair.Key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = conf
	srv.StartTLS()
	defer srv.Close()
	get := func(max uint16) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MaxVersion: max}}}
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(tls.VersionTLS12); err != nil {
		t.Errorf("TLS 1.2: %v", err)
	}
	if err := get(tls.VersionTLS11); err == nil {
		t.Error("TLS 1.1 accepted")
	}
	if _, err := certreload.ServerTLS(filepath.Join(dir, "none.crt"), pair.Key, time.Minute); err == nil || !strings.Contains(err.Error(), "none.crt") {
		t.Errorf("a missing certificate: %v", err)
	}
}
