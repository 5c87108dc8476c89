package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The chart's controller: the Deployment <release>-controller (a shard's:
// <release>-controller-<shard>) in the release namespace, installed as release
// faultline in namespace faultline (docs/install.md); its container "controller".
const (
	chartNamespace      = "faultline"
	chartDeployment     = "faultline-controller"
	chartContainer      = "controller"
	controllerComponent = "app.kubernetes.io/component=controller"
	shardLabel          = "faultline.io/shard"
)

// defaultControllerRef is --from-cluster's value when it is given alone.
const defaultControllerRef = chartNamespace + "/" + chartDeployment

// notTakenFlags are controller flags replay shares but does not take from the
// Deployment: their values are files in the controller's pod, or its own kubeconfig.
var notTakenFlags = map[string]string{
	"kubeconfig":             "the controller's own",
	"loki-bearer-token-file": "a file in the controller's pod",
	"loki-ca-file":           "a file in the controller's pod",
	"loki-cert-file":         "a file in the controller's pod",
	"loki-key-file":          "a file in the controller's pod",
}

// clusterConfig is the configuration replay took from a controller's Deployment:
// printed to standard error (table output) and as the JSON's "config".
type clusterConfig struct {
	Deployment string `json:"deployment"` // namespace/name
	Generation int64  `json:"generation"`
	Image      string `json:"image"`
	Container  string `json:"container"`
	// Taken are the flags of the Deployment replay runs with (the others keep their
	// defaults, which are the controller's).
	Taken []flagValue `json:"taken"`
	// Overridden are the Deployment's flags given on replay's command line too.
	Overridden []flagOverride `json:"overridden,omitempty"`
	// NotTaken are the Deployment's flags replay shares but cannot take, with why.
	NotTaken []flagValue `json:"notTaken,omitempty"`
	// NotReplayed names the Deployment's flags that do not change a decision.
	NotReplayed []string `json:"notReplayed,omitempty"`
	// DefaultPacks says whether the built-in packs come first (--no-default-packs).
	DefaultPacks bool `json:"defaultPacks"`
	// Packs are the Deployment's --packs, in order, with what backs each.
	Packs []clusterPack `json:"packs"`
	// Notes say what the operator may need to give by hand.
	Notes []string `json:"notes,omitempty"`
}

type flagValue struct {
	Flag  string `json:"flag"`
	Value string `json:"value"`
	Why   string `json:"why,omitempty"`
}

type flagOverride struct {
	Flag       string `json:"flag"`
	Deployment string `json:"deployment"`
	Value      string `json:"value"`
}

type clusterPack struct {
	Path      string      `json:"path"`
	Volume    string      `json:"volume"`
	MountPath string      `json:"mountPath"`
	Objects   []objectRef `json:"objects"`
	local     string
}

// controllerDeployment is the controller Deployment replay reads.
type controllerDeployment struct {
	client kubernetes.Interface
	ns     string
	name   string
}

// parseControllerRef reads --from-cluster's NAMESPACE/DEPLOYMENT (a bare name is in
// the chart's namespace).
func parseControllerRef(ref string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		ns, name = chartNamespace, ref
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("--from-cluster %q: want NAMESPACE/DEPLOYMENT", ref)
	}
	return ns, name, nil
}

// get reads the Deployment, explaining a refusal and, when it is not there, naming
// the controller Deployments of its namespace (a sharded controller has one each).
func (d controllerDeployment) get(ctx context.Context) (*appsv1.Deployment, error) {
	dep, err := d.client.AppsV1().Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
	switch {
	case err == nil:
		return dep, nil
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("get Deployment %s/%s: forbidden: --from-cluster needs get on it (deployments, apps) and on the ConfigMaps its packs are mounted from: %w", d.ns, d.name, err)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get Deployment %s/%s: %w", d.ns, d.name, err)
	}
	l, lerr := d.client.AppsV1().Deployments(d.ns).List(ctx, metav1.ListOptions{LabelSelector: controllerComponent})
	if lerr != nil || len(l.Items) == 0 {
		return nil, fmt.Errorf("Deployment %s/%s not found (name the controller's as --from-cluster=NAMESPACE/DEPLOYMENT): %w", d.ns, d.name, err)
	}
	var names []string
	for _, o := range l.Items {
		n := o.Name
		if s := o.Labels[shardLabel]; s != "" {
			n += " (shard " + s + ")"
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return nil, fmt.Errorf("Deployment %s/%s not found; the controller Deployments in %s: %s: name one as --from-cluster=%s/NAME",
		d.ns, d.name, d.ns, strings.Join(names, ", "), d.ns)
}

// controllerArgs are the flags of the controller container's command line.
func controllerArgs(dep *appsv1.Deployment) (*corev1.Container, []string, error) {
	spec := &dep.Spec.Template.Spec
	var names []string
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Name != chartContainer {
			names = append(names, c.Name)
			continue
		}
		var argv []string
		if len(c.Command) > 0 {
			argv = append(argv, c.Command[1:]...)
		}
		argv = append(argv, c.Args...)
		if len(argv) == 0 || argv[0] != "controller" {
			return nil, nil, fmt.Errorf("container %q of Deployment %s/%s does not run `faultline controller` (command %q, args %q)",
				c.Name, dep.Namespace, dep.Name, c.Command, c.Args)
		}
		return c, argv[1:], nil
	}
	return nil, nil, fmt.Errorf("Deployment %s/%s has no container %q (its containers: %s)", dep.Namespace, dep.Name, chartContainer, strings.Join(names, ", "))
}

// takeControllerFlags parses the controller's args with the controller command's
// own flags, and sets each flag replay shares in fs to the Deployment's value,
// unless the command line gave it (changed holds those). It returns the
// Deployment's --packs, in order.
func takeControllerFlags(args []string, fs *pflag.FlagSet, changed func(string) bool, cc *clusterConfig) ([]string, error) {
	ctrl := newControllerCmd().Flags()
	type occurrence struct{ name, value string }
	var given []occurrence
	if err := ctrl.ParseAll(args, func(f *pflag.Flag, v string) error {
		given = append(given, occurrence{f.Name, v})
		return ctrl.Set(f.Name, v)
	}); err != nil {
		return nil, fmt.Errorf("the controller's args: %w", err)
	}
	var packs, taken []string
	seen := map[string]bool{}
	for _, o := range given {
		first := !seen[o.name]
		seen[o.name] = true
		switch why, skip := notTakenFlags[o.name]; {
		case o.name == "packs":
			packs = append(packs, o.value)
		case fs.Lookup(o.name) == nil:
			if first {
				cc.NotReplayed = append(cc.NotReplayed, "--"+o.name)
			}
		case skip:
			cc.NotTaken = append(cc.NotTaken, flagValue{Flag: "--" + o.name, Value: o.value, Why: why})
		case changed(o.name):
			if first {
				cc.Overridden = append(cc.Overridden, flagOverride{Flag: "--" + o.name,
					Deployment: ctrl.Lookup(o.name).Value.String(), Value: fs.Lookup(o.name).Value.String()})
			}
		default:
			if err := fs.Set(o.name, o.value); err != nil {
				return nil, fmt.Errorf("the controller's --%s %q: %w", o.name, o.value, err)
			}
			if first {
				taken = append(taken, o.name)
			}
		}
	}
	for _, name := range taken {
		cc.Taken = append(cc.Taken, flagValue{Flag: "--" + name, Value: fs.Lookup(name).Value.String()})
	}
	return packs, nil
}

// readController reads the controller Deployment d: its flags into fs (those the
// command line did not give), its packs written out under dir.
func readController(ctx context.Context, d controllerDeployment, fs *pflag.FlagSet, dir string) (*clusterConfig, error) {
	dep, err := d.get(ctx)
	if err != nil {
		return nil, err
	}
	c, args, err := controllerArgs(dep)
	if err != nil {
		return nil, err
	}
	cc := &clusterConfig{Deployment: dep.Namespace + "/" + dep.Name, Generation: dep.Generation, Image: c.Image, Container: c.Name}
	changed := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { changed[f.Name] = true })
	paths, err := takeControllerFlags(args, fs, func(n string) bool { return changed[n] }, cc)
	if err != nil {
		return nil, fmt.Errorf("Deployment %s: %w", cc.Deployment, err)
	}
	noDefaults, err := fs.GetBool("no-default-packs")
	if err != nil {
		return nil, err
	}
	cc.DefaultPacks = !noDefaults
	pf := &podFiles{client: d.client, namespace: dep.Namespace, spec: &dep.Spec.Template.Spec, container: c, dir: dir, volumes: map[string]*localVolume{}}
	for _, p := range paths {
		m, err := pf.local(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("Deployment %s: --packs %w", cc.Deployment, err)
		}
		cc.Packs = append(cc.Packs, clusterPack{Path: p, Volume: m.volume, MountPath: m.mountPath, Objects: m.objects, local: m.local})
	}
	cc.notes(c)
	return cc, nil
}

// notes says what replay could not take and the operator may have to give.
func (cc *clusterConfig) notes(c *corev1.Container) {
	for _, f := range cc.Taken {
		if f.Flag == "--loki-url" {
			cc.Notes = append(cc.Notes, "--loki-url is the controller's (an in-cluster address): give --loki-url to reach Loki from elsewhere, e.g. through kubectl port-forward")
		}
	}
	for _, e := range c.Env {
		if e.Name == "LOKI_PASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && os.Getenv("LOKI_PASSWORD") == "" {
			cc.Notes = append(cc.Notes, fmt.Sprintf("the controller's Loki password is in Secret %s, key %s: set $LOKI_PASSWORD (replay does not read Secrets for it)",
				e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key))
		}
	}
	if len(cc.NotTaken) > 0 {
		cc.Notes = append(cc.Notes, "the flags not taken name files in the controller's pod: give them on the command line if Loki needs them")
	}
}

// paths are the local directories of the Deployment's packs, in order.
func (cc *clusterConfig) paths() []string {
	var out []string
	for _, p := range cc.Packs {
		out = append(out, p.local)
	}
	return out
}

// podPaths are the Deployment's --packs as the controller names them.
func (cc *clusterConfig) podPaths() []string {
	var out []string
	for _, p := range cc.Packs {
		out = append(out, p.Path)
	}
	return out
}

// writeText prints the configuration for an operator.
func (cc *clusterConfig) writeText(w io.Writer) error {
	fmt.Fprintf(w, "configuration of Deployment %s (generation %d, container %s, image %s)\n", cc.Deployment, cc.Generation, cc.Container, cc.Image)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLAG\tVALUE\tFROM")
	for _, f := range cc.Taken {
		fmt.Fprintf(tw, "%s\t%s\tdeployment\n", f.Flag, f.Value)
	}
	for _, f := range cc.Overridden {
		fmt.Fprintf(tw, "%s\t%s\tcommand line (deployment: %s)\n", f.Flag, f.Value, f.Deployment)
	}
	for _, f := range cc.NotTaken {
		fmt.Fprintf(tw, "%s\t%s\tnot taken: %s\n", f.Flag, f.Value, f.Why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	builtIn := "the built-in packs, then"
	if !cc.DefaultPacks {
		builtIn = "no built-in packs (--no-default-packs);"
	}
	fmt.Fprintf(w, "packs: %s %d --packs:\n", builtIn, len(cc.Packs))
	for _, p := range cc.Packs {
		var objs []string
		for _, o := range p.Objects {
			objs = append(objs, o.String())
		}
		fmt.Fprintf(w, "  %s: volume %s at %s: %s\n", p.Path, p.Volume, p.MountPath, strings.Join(objs, ", "))
	}
	if len(cc.NotReplayed) > 0 {
		fmt.Fprintf(w, "not replayed (no replay flag): %s\n", strings.Join(cc.NotReplayed, " "))
	}
	for _, n := range cc.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	_, err := fmt.Fprintln(w)
	return err
}
