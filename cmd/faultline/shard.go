package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/faultline-dev/faultline/controller"
	"github.com/faultline-dev/faultline/controller/lokisource"
)

// shardFlags split the fleet between controllers by a node label (docs/scale.md).
type shardFlags struct {
	label   string   // the node label, e.g. faultline.io/shard
	value   string   // this shard's value of it
	name    string   // names its Lease and checkpoint (default: value)
	others  []string // set on the default shard: the other shards' values
	matcher string   // LogQL label matcher restricting the reads to the shard's nodes
}

func (s *shardFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.label, "shard-label", "", "node label that splits the fleet between controllers (empty: one controller for every node)")
	f.StringVar(&s.value, "shard", "", "this controller's value of --shard-label: it owns the nodes labelled so, with its own Lease, checkpoint and budget")
	f.StringVar(&s.name, "shard-name", "", "names the shard's Lease faultline-controller-NAME and checkpoint faultline-checkpoint-NAME (default: the --shard value; a DNS label)")
	f.StringSliceVar(&s.others, "shard-default-except", nil, "make this the default shard: it also owns nodes without --shard-label or with a value outside these (the other shards' values)")
	f.StringVar(&s.matcher, "shard-stream-matcher", "", `LogQL label matcher added to every stream selector so Loki sends only this shard's lines, e.g. node=~"gpu-a-.*", or, starting with "|", a label filter after it for a node label Loki keeps as structured metadata, e.g. '| node=~"gpu-a-.*"' (default: every candidate line is read; other shards' are skipped)`)
}

// apply configures cfg for the shard: the Node selector, the Lease and checkpoint
// names, the stream selectors.
func (s *shardFlags) apply(cfg *controller.Config) error {
	sel, name, err := s.selector()
	if err != nil || sel == nil {
		return err
	}
	cfg.Act.Shard = sel
	cfg.LeaseName = controller.DefaultLeaseName + "-" + name
	cfg.CheckpointName = controller.DefaultCheckpointName + "-" + name
	cfg.Selectors, err = s.streams(cfg.Selectors)
	return err
}

// selector checks the flags and returns the selector of the shard's Nodes and the
// shard's name; nil without --shard-label (one controller for every node).
func (s *shardFlags) selector() (labels.Selector, string, error) {
	if s.label == "" {
		if s.value != "" || s.name != "" || len(s.others) > 0 || s.matcher != "" {
			return nil, "", fmt.Errorf("--shard, --shard-name, --shard-default-except and --shard-stream-matcher need --shard-label")
		}
		return nil, "", nil
	}
	if errs := validation.IsQualifiedName(s.label); len(errs) > 0 {
		return nil, "", fmt.Errorf("--shard-label %q: %s", s.label, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(s.value); len(errs) > 0 || s.value == "" {
		return nil, "", fmt.Errorf("--shard %q: a label value is required: %s", s.value, strings.Join(errs, "; "))
	}
	name := s.name
	if name == "" {
		name = s.value
	}
	// The name is part of the shard's Lease and ConfigMap names: a DNS label.
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, "", fmt.Errorf("shard name %q (--shard-name, default --shard): %s", name, strings.Join(errs, "; "))
	}
	var req *labels.Requirement
	var err error
	if len(s.others) > 0 {
		if slices.Contains(s.others, s.value) {
			return nil, "", fmt.Errorf("--shard-default-except lists this shard's own value %q", s.value)
		}
		req, err = labels.NewRequirement(s.label, selection.NotIn, s.others)
	} else {
		req, err = labels.NewRequirement(s.label, selection.Equals, []string{s.value})
	}
	if err != nil {
		return nil, "", fmt.Errorf("shard selector: %w", err)
	}
	return labels.NewSelector().Add(*req), name, nil
}

// streams restricts the stream selectors to the shard's lines (--shard-stream-matcher).
func (s *shardFlags) streams(sel lokisource.Selectors) (lokisource.Selectors, error) {
	if s.matcher == "" {
		return sel, nil
	}
	out, err := sel.WithMatcher(s.matcher)
	if err != nil {
		return nil, fmt.Errorf("--shard-stream-matcher: %w", err)
	}
	return out, nil
}
