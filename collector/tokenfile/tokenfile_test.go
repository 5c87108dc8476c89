package tokenfile

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
)

// TestBearer: the extension sends the file's token on every request, fails to start
// without the file, and needs a filename.
func TestBearer(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("t1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.Header.Get("Authorization") }))
	defer srv.Close()

	if NewFactory().Type() != Type {
		t.Fatalf("factory of %s", NewFactory().Type())
	}
	ext := &authenticator{filename: file}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	rt, err := ext.RoundTripper(http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a := <-got; a != "Bearer t1" {
		t.Errorf("Authorization %q, want the file's token", a)
	}

	missing := &authenticator{filename: filepath.Join(dir, "absent")}
	if err := missing.Start(context.Background(), componenttest.NewNopHost()); err == nil {
		t.Error("started without its token file")
	}
	if err := (&Config{}).Validate(); err == nil {
		t.Error("a config without filename validates")
	}
}
