//go:build cgo && !kustomize_disable_go_plugin_support

package act

// Building with cgo needs -tags=kustomize_disable_go_plugin_support (the Makefile
// exports it in GOFLAGS). The drain helper (k8s.io/kubectl/pkg/drain) reaches
// kustomize, whose plugin loader imports Go's plugin package unless that tag is
// set; with plugin linked, a cgo build binds every dynamic symbol at start-up
// (-z now), and go-nvml's symbols, left for it to resolve when it loads
// libnvidia-ml, make the binary die before main. Static builds (CGO_ENABLED=0)
// link no dynamic symbols and are not affected.
//
// The guard refuses such a binary when it is linked, not when the package is
// compiled, so that go vet and editors work without the tag: the symbol below is
// defined nowhere, so linking fails naming it, and where go-nvml lets the link
// leave symbols unresolved, the binary stops at start naming it (a data
// relocation: bound before the NVML functions' slots).

/*
extern void build_needs_tag_kustomize_disable_go_plugin_support_see_Makefile_GOFLAGS(void);
void *faultline_build_tag_guard = (void *)&build_needs_tag_kustomize_disable_go_plugin_support_see_Makefile_GOFLAGS;
*/
import "C"

var _ = C.faultline_build_tag_guard
