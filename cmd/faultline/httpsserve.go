package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/faultline-dev/faultline/certreload"
)

// serveHTTPS serves h on addr over TLS only, with the certificate and key read
// again every reload (a renewed Secret changes its volume in place); certFlag names
// the certificate's flag in errors. It returns the listening address and stop.
func serveHTTPS(addr, certFile, keyFile, certFlag string, reload time.Duration, h http.Handler, maxHeaderBytes int, log *slog.Logger) (string, func(), error) {
	tc, err := certreload.ServerTLS(certFile, keyFile, reload)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", certFlag, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	hs := &http.Server{Handler: h, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go hs.Serve(tls.NewListener(ln, tc))
	return ln.Addr().String(), func() { _ = hs.Shutdown(context.Background()) }, nil
}
