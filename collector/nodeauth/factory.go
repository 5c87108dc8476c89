package nodeauth

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"k8s.io/utils/clock"
)

// Type is the extension's name in a collector configuration.
var Type = component.MustNewType("faultlineauth")

// NewFactory returns the factory the collector builder registers.
func NewFactory() extension.Factory {
	return extension.NewFactory(Type, func() component.Config { return createDefaultConfig() },
		func(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
			return newAuthenticator(cfg.(*Config), set.TelemetrySettings, clock.RealClock{})
		}, component.StabilityLevelBeta)
}
