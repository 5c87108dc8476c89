// Package tokenfile is an OpenTelemetry Collector client authenticator (extension
// "faultlinetoken") that sends the bearer token of a file the kubelet renews: a
// projected ServiceAccount token, on the exporter to faultline's controller intake.
//
// The file is read again every minute (client-go's cached file token source), as
// Kubernetes' own clients read theirs, so the kubelet's renewals (at 80% of the
// token's lifetime, by swapping the volume's ..data link) are followed without a
// watch on the file. The upstream bearertokenauth extension of this collector
// release watches the file's directory for events on the file's own name, which a
// projected volume's renewal does not produce: it would send the first token until
// it expires.
package tokenfile

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"k8s.io/client-go/transport"
)

// Type is the extension's name in a collector configuration.
var Type = component.MustNewType("faultlinetoken")

// Config of the faultlinetoken extension.
type Config struct {
	// Filename is the token file (e.g. a projected ServiceAccount token).
	Filename string `mapstructure:"filename"`
}

// Validate checks the configuration when the collector loads it.
func (c *Config) Validate() error {
	if c.Filename == "" {
		return errors.New("filename is required")
	}
	return nil
}

// NewFactory returns the factory the collector builder registers.
func NewFactory() extension.Factory {
	return extension.NewFactory(Type, func() component.Config { return &Config{} },
		func(_ context.Context, _ extension.Settings, cfg component.Config) (extension.Extension, error) {
			return &authenticator{filename: cfg.(*Config).Filename}, nil
		}, component.StabilityLevelBeta)
}

type authenticator struct {
	component.ShutdownFunc
	filename string
}

var _ extensionauth.HTTPClient = (*authenticator)(nil)

// Start fails when the token cannot be read, so a missing volume shows at once.
func (a *authenticator) Start(context.Context, component.Host) error {
	if _, err := transport.NewCachedFileTokenSource(a.filename).Token(); err != nil {
		return fmt.Errorf("faultlinetoken: %w", err)
	}
	return nil
}

// RoundTripper sets "Authorization: Bearer <token>" on every request, with the
// token last read from the file.
func (a *authenticator) RoundTripper(base http.RoundTripper) (http.RoundTripper, error) {
	rt, err := transport.NewBearerAuthWithRefreshRoundTripper("", a.filename, base)
	if err != nil {
		return nil, fmt.Errorf("faultlinetoken: %w", err)
	}
	return rt, nil
}
