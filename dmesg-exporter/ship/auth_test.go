package ship

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuthClient: the token from the file reaches an https receiver that the CA
// file verifies; without the CA the same receiver is refused; a missing token
// file stops the start.
func TestAuthClient(t *testing.T) {
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(tokenFile, []byte("projected-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}

	client, err := Auth{TokenFile: tokenFile, CAFile: caFile}.Client()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Sender{
		NewOTLP(srv.URL, OTLPOptions{Client: client}),
		NewLoki(srv.URL, LokiOptions{Client: client}),
	} {
		if err := s.Send(context.Background(), sampleRecords()); err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
	}
	if len(got) != 2 || got[0] != "Bearer projected-token" || got[1] != got[0] {
		t.Fatalf("Authorization headers %q, want the file's token on both senders", got)
	}

	noCA, err := Auth{TokenFile: tokenFile}.Client()
	if err != nil {
		t.Fatal(err)
	}
	err = NewOTLP(srv.URL, OTLPOptions{Client: noCA}).Send(context.Background(), sampleRecords())
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("send to a receiver the system roots do not know: %v, want a certificate error", err)
	}
	if len(got) != 2 {
		t.Fatalf("the unverified receiver got the token: %q", got)
	}

	if _, err := (Auth{TokenFile: filepath.Join(dir, "missing")}).Client(); err == nil {
		t.Fatal("a missing token file was accepted")
	}
	if c, err := (Auth{}).Client(); c != nil || err != nil {
		t.Fatalf("no auth: client %v, err %v; want the senders' default", c, err)
	}
}
