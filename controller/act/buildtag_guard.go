//go:build cgo && !kustomize_disable_go_plugin_support

package act

// Building with cgo needs -tags=kustomize_disable_go_plugin_support (the Makefile
// exports it in GOFLAGS). The drain helper (k8s.io/kubectl/pkg/drain) reaches
// kustomize, whose plugin loader imports Go's plugin package unless that tag is
// set; with plugin linked, a cgo build binds every dynamic symbol at start-up
// (-z now), and go-nvml's symbols, left for it to resolve when it loads
// libnvidia-ml, make the binary die before main. Static builds (CGO_ENABLED=0)
// link no dynamic symbols and are not affected, so only cgo builds are refused,
// here, at compile time.
var _ = buildWithTag_kustomize_disable_go_plugin_support_seeMakefileGOFLAGS
