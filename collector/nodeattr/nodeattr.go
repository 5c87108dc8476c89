// Package nodeattr is an OpenTelemetry Collector logs processor ("faultlinenode")
// that attributes every log record to the node its sender authenticated as (the
// nodeauth extension's AttrNode). It overwrites the node attributes — on the
// resource, on each instrumentation scope and on each record — with that node, so
// Loki, and the controller that taints by Loki's node label or structured metadata,
// only ever see the sender's own node (Loki keeps scope and record attributes as
// structured metadata, and a pipeline may promote any of them).
//
// A record that named another node is relabelled rather than refused: its line
// is still evidence about the node that sent it, and refusing would make an
// honest-but-misconfigured exporter retry forever. Every relabelled record is
// counted (faultline_nodeattr_relabelled_log_records) and logged. A request with
// no authenticated node (the processor in a pipeline without the authenticator)
// is refused, so a misconfiguration fails closed.
package nodeattr

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/faultline-dev/faultline/collector/nodeauth"
)

// Type is the processor's name in a collector configuration.
var Type = component.MustNewType("faultlinenode")

// Config of the faultlinenode processor.
type Config struct {
	// Attributes are the node attributes written on the resource and checked on
	// each record (default: k8s.node.name, host.name, node — all the dmesg-exporter
	// sets, and the ones Loki may promote to labels).
	Attributes []string `mapstructure:"attributes"`
}

// Validate checks the configuration when the collector loads it.
func (c *Config) Validate() error {
	if len(c.Attributes) == 0 {
		return errors.New("attributes: at least one node attribute is required")
	}
	return nil
}

// NewFactory returns the factory the collector builder registers.
func NewFactory() processor.Factory {
	return processor.NewFactory(Type,
		func() component.Config {
			return &Config{Attributes: []string{"k8s.node.name", "host.name", "node"}}
		},
		processor.WithLogs(createLogs, component.StabilityLevelBeta))
}

// ErrNoNode refuses a request that reached the processor unauthenticated.
var ErrNoNode = errors.New("faultlinenode: the request carries no authenticated node (is the faultlineauth authenticator on the receiver?)")

type nodeProcessor struct {
	attrs           []string
	log             *zap.Logger
	relabelled      metric.Int64Counter
	unauthenticated metric.Int64Counter
}

func createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	meter := set.MeterProvider.Meter("github.com/faultline-dev/faultline/collector/nodeattr")
	relabelled, err := meter.Int64Counter("faultline_nodeattr_relabelled_log_records",
		metric.WithDescription("Log records whose node attribute named another node than the sender's authenticated one, rewritten to the sender's node"),
		metric.WithUnit("{records}"))
	if err != nil {
		return nil, fmt.Errorf("faultlinenode: metric: %w", err)
	}
	unauth, err := meter.Int64Counter("faultline_nodeattr_unauthenticated_log_records",
		metric.WithDescription("Log records refused because their request carried no authenticated node"),
		metric.WithUnit("{records}"))
	if err != nil {
		return nil, fmt.Errorf("faultlinenode: metric: %w", err)
	}
	p := &nodeProcessor{attrs: cfg.(*Config).Attributes, log: set.Logger, relabelled: relabelled, unauthenticated: unauth}
	return processorhelper.NewLogs(ctx, set, cfg, next, p.process,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
}

func (p *nodeProcessor) process(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	info := client.FromContext(ctx)
	var node string
	if info.Auth != nil {
		node, _ = info.Auth.GetAttribute(nodeauth.AttrNode).(string)
	}
	if node == "" {
		p.unauthenticated.Add(ctx, int64(ld.LogRecordCount()))
		return ld, consumererror.NewPermanent(ErrNoNode)
	}
	var forged int64
	claimed := map[string]bool{}
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		resForged := p.overwrite(rl.Resource().Attributes(), node, claimed)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			scopeForged := p.fix(sls.At(j).Scope().Attributes(), node, claimed)
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				// Each record counts once, whether its resource, its scope or itself
				// claimed.
				if recForged := p.fix(lrs.At(k).Attributes(), node, claimed); resForged || scopeForged || recForged {
					forged++
				}
			}
		}
	}
	if forged > 0 {
		p.relabelled.Add(ctx, forged)
		names := make([]string, 0, len(claimed))
		for c := range claimed {
			names = append(names, c)
		}
		sa, _ := info.Auth.GetAttribute(nodeauth.AttrServiceAccount).(string)
		p.log.Warn("log records named another node than their sender's; relabelled to the sender's node",
			zap.String("node", node), zap.String("sender", sa), zap.Strings("claimed", names), zap.Int64("records", forged))
	}
	return ld, nil
}

// overwrite sets every node attribute of a resource to node; it reports whether
// one named another node.
func (p *nodeProcessor) overwrite(attrs pcommon.Map, node string, claimed map[string]bool) bool {
	forged := p.fix(attrs, node, claimed)
	for _, k := range p.attrs {
		attrs.PutStr(k, node)
	}
	return forged
}

// fix rewrites the node attributes present in attrs that differ from node; it
// reports whether there was one.
func (p *nodeProcessor) fix(attrs pcommon.Map, node string, claimed map[string]bool) bool {
	forged := false
	for _, k := range p.attrs {
		if v, ok := attrs.Get(k); ok && v.AsString() != node {
			if len(claimed) < 16 {
				claimed[v.AsString()] = true
			}
			attrs.PutStr(k, node)
			forged = true
		}
	}
	return forged
}
