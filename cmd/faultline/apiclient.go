package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/faultline-dev/faultline/internal/daemon"
)

// apiHTTPClient is an HTTP client that authenticates as the kubeconfig's user does
// with the apiserver (client-go's transport: bearer tokens, token files, exec
// plugins). The apiserver's CA and client certificate are not the controller's, so
// only the credentials are kept.
func apiHTTPClient(kubeconfig string) (*http.Client, error) {
	rc, err := daemon.KubeRESTConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("credentials for the controller API: %w", err)
	}
	rc = rest.CopyConfig(rc)
	rc.TLSClientConfig = rest.TLSClientConfig{}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("credentials for the controller API: %w", err)
	}
	return hc, nil
}

func callAPIWith(ctx context.Context, hc *http.Client, method, url string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("controller API: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("controller API %s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(data)))
	}
	return json.Unmarshal(data, out)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
