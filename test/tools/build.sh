#!/usr/bin/env bash
# Builds (or installs) the pinned real components into a cache outside the checkout.
#
#   test/tools/build.sh [all|kubernetes|kube-controller-manager|etcd|loki|otelcol|helm|kwok|debian|path]...
#
# Cache: $FAULTLINE_TOOLS_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/faultline/tools.
# Each component lands in <cache>/<name>-<version>/ and is built only when missing, so a
# second run is a no-op. `path` prints the directories that hold the binaries.
# Builds take a lock on the cache, so concurrent runs (make tools, test binaries that
# build a missing component) wait for each other instead of building the same thing twice.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$HERE/versions.env"
CACHE=${FAULTLINE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/faultline/tools}
mkdir -p "$CACHE"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { printf '[tools] %s\n' "$*" >&2; }

# done_marker DIR: a component is complete only when its build wrote this marker last,
# so an interrupted build is redone instead of trusted.
have() { [ -f "$1/.complete" ]; }

gomod_file() { # print the path of a module's go.mod in the module cache
  go mod download -json "$1" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p'
}

build_kubernetes() {
  local out="$CACHE/kubernetes-$KUBERNETES_VERSION" src="$CACHE/src/kubernetes-$KUBERNETES_VERSION"
  have "$out" && return 0
  log "building kube-apiserver and kubectl v$KUBERNETES_VERSION (several minutes cold)"
  local staging="0.${KUBERNETES_VERSION#1.}" minor
  minor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)
  rm -rf "$src"; mkdir -p "$src" "$out"; cd "$src"
  cp "$(gomod_file "k8s.io/kubernetes@v$KUBERNETES_VERSION")" k8s.mod
  {
    printf 'module faultline.local/tools/kubernetes\n\ngo 1.23.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$KUBERNETES_VERSION"
    # k8s.io/kubernetes requires its staging modules at v0.0.0 with ./staging replaces; pin them.
    awk '$2=="v0.0.0"{print "\t" $1 " => " $1 " v'"$staging"'"}' k8s.mod
    printf ')\n'
  } > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kubectl"\n)\n' > tools.go
  # kube-controller-manager is built separately (build_kube_controller_manager): some of its
  # staging modules are missing from the module mirror at this release.
  # -e: test-only dependencies of k8s.io/kubernetes may be missing from a partial module mirror.
  go mod tidy -e
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=v$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  go build -trimpath -ldflags="$ld" -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
  "$out/kube-apiserver" --version >&2
  touch "$out/.complete"
}

build_kube_controller_manager() {
  local out="$CACHE/kube-controller-manager-$KUBERNETES_VERSION" src="$CACHE/src/kube-controller-manager-$KUBERNETES_VERSION"
  have "$out" && return 0
  log "building kube-controller-manager v$KUBERNETES_VERSION"
  local staging="0.${KUBERNETES_VERSION#1.}" minor m v
  minor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)
  rm -rf "$src"; mkdir -p "$src" "$out"; cd "$src"
  cp "$(gomod_file "k8s.io/kubernetes@v$KUBERNETES_VERSION")" k8s.mod
  {
    printf 'module faultline.local/tools/kube-controller-manager\n\ngo 1.23.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$KUBERNETES_VERSION"
    for m in $(awk '$2=="v0.0.0"{print $1}' k8s.mod); do
      v=$staging
      # A partial module mirror lacks some staging modules at the pinned patch release
      # (at 0.32.13: cri-client, csi-translation-lib, endpointslice, kube-controller-manager,
      # kube-proxy, kube-scheduler, sample-apiserver): take those at the fallback release.
      if ! go mod download "$m@v$staging" >/dev/null 2>&1; then
        v=$KUBERNETES_STAGING_FALLBACK
        log "$m v$staging is not available; using v$v"
      fi
      printf '\t%s => %s v%s\n' "$m" "$m" "$v"
    done
    printf ')\n'
  } > go.mod.tmp
  mv go.mod.tmp go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-controller-manager"\n' > tools.go
  go mod tidy -e
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=v$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  go build -trimpath -ldflags="$ld" -o "$out/" k8s.io/kubernetes/cmd/kube-controller-manager
  "$out/kube-controller-manager" --version >&2
  touch "$out/.complete"
}

build_etcd() {
  local out="$CACHE/etcd-$ETCD_VERSION" src="$CACHE/src/etcd-$ETCD_VERSION"
  have "$out" && return 0
  log "building etcd v$ETCD_VERSION"
  rm -rf "$src"; mkdir -p "$src" "$out"; cd "$src"
  # `go install` refuses etcd (its go.mod has replace directives): wrap etcdmain in a module.
  printf 'module faultline.local/tools/etcd\n\ngo 1.23\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" > go.mod
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' > main.go
  go mod tidy
  go build -trimpath -ldflags='-s -w' -o "$out/etcd" .
  touch "$out/.complete"
}

build_loki() {
  local out="$CACHE/loki-$LOKI_VERSION" src="$CACHE/src/loki-$LOKI_VERSION"
  have "$out" && return 0
  log "building loki v$LOKI_VERSION (about 10 minutes cold)"
  rm -rf "$src"; mkdir -p "$src" "$out"; cd "$src"
  cp "$(gomod_file "github.com/grafana/loki/v3@v$LOKI_VERSION")" loki.mod
  local push goversion
  push=$(awk '$1=="github.com/grafana/loki/pkg/push"{print $2; exit}' loki.mod)
  goversion=$(awk '$1=="go"{print $2}' loki.mod)
  {
    printf 'module faultline.local/tools/loki\n\ngo %s\n\nrequire github.com/grafana/loki/v3 v%s\n\n' "$goversion" "$LOKI_VERSION"
    # Loki's own replace directives must be copied; its local ./pkg/push replace is pinned instead.
    grep -E '^replace' loki.mod | grep -v '=> \./' || true
    echo "replace github.com/grafana/loki/pkg/push => github.com/grafana/loki/pkg/push $push"
    grep -E '^exclude' loki.mod || true
  } > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/grafana/loki/v3/cmd/loki"\n' > tools.go
  go get "github.com/grafana/loki/v3/cmd/loki@v$LOKI_VERSION"   # not tidy: avoids test-only deps
  go build -trimpath -ldflags='-s -w' -o "$out/loki" github.com/grafana/loki/v3/cmd/loki
  touch "$out/.complete"
}

# faultline's own collector components (a module of their own) and its build key: a
# hash of the builder manifest and the module's sources, so that changing either
# builds a new collector instead of reusing the cached one.
COLLECTOR_MODULE=$(cd "$HERE/../../collector" && pwd)
otelcol_key() {
  (cd "$COLLECTOR_MODULE" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) ! -name '*_test.go' -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum; sha256sum "$HERE/otelcol-builder.yaml" | cut -d' ' -f1) |
    sha256sum | cut -c1-12
}
OTELCOL_DIR="otelcol-$OTELCOL_VERSION-$(otelcol_key)"

build_otelcol() {
  local out="$CACHE/$OTELCOL_DIR" src="$CACHE/src/$OTELCOL_DIR"
  have "$out" && return 0
  if grep -E 'gomod:' "$HERE/otelcol-builder.yaml" | grep -v 'github.com/faultline-dev/faultline/' | grep -vq " v$OTELCOL_VERSION\$"; then
    log "otelcol-builder.yaml pins a version other than v$OTELCOL_VERSION"; exit 1
  fi
  log "building the OpenTelemetry Collector v$OTELCOL_VERSION with the Collector Builder"
  rm -rf "$src"; mkdir -p "$src/bin" "$out"
  GOBIN="$src/bin" go install "go.opentelemetry.io/collector/cmd/builder@v$OTELCOL_VERSION"
  # The builder does not expand environment variables: write the paths into a copy.
  sed -e "s|\${OTELCOL_BUILD_DIR}|$src/build|" -e "s|\${FAULTLINE_COLLECTOR_DIR}|$COLLECTOR_MODULE|" \
    "$HERE/otelcol-builder.yaml" > "$src/builder.yaml"
  (cd "$src" && "$src/bin/builder" --config "$src/builder.yaml")
  cp "$src/build/otelcol-faultline" "$out/otelcol-faultline"
  touch "$out/.complete"
}

build_helm() {
  local out="$CACHE/helm-$HELM_VERSION"
  have "$out" && return 0
  log "building helm v$HELM_VERSION"
  mkdir -p "$out"
  GOBIN="$out" go install -trimpath -ldflags='-s -w' "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  touch "$out/.complete"
}

build_kwok() {
  local out="$CACHE/kwok-$KWOK_VERSION"
  have "$out" && return 0
  log "building kwok v$KWOK_VERSION"
  mkdir -p "$out"
  GOBIN="$out" go install -trimpath -ldflags='-s -w' "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  "$out/kwok" --version >&2
  touch "$out/.complete"
}

build_controller_gen() {
  local out="$CACHE/controller-gen-$CONTROLLER_TOOLS_VERSION"
  have "$out" && return 0
  log "building controller-gen v$CONTROLLER_TOOLS_VERSION"
  mkdir -p "$out"
  GOBIN="$out" go install -trimpath -ldflags='-s -w' "sigs.k8s.io/controller-tools/cmd/controller-gen@v$CONTROLLER_TOOLS_VERSION"
  touch "$out/.complete"
}

install_debian() {
  local missing=() pkg cmd
  for pkg in $DEBIAN_PACKAGES; do
    case $pkg in iputils-ping) cmd=ping ;; *) cmd=$pkg ;; esac
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

print_path() {
  echo "$CACHE/kubernetes-$KUBERNETES_VERSION:$CACHE/kube-controller-manager-$KUBERNETES_VERSION:$CACHE/etcd-$ETCD_VERSION:$CACHE/loki-$LOKI_VERSION:$CACHE/$OTELCOL_DIR:$CACHE/helm-$HELM_VERSION:$CACHE/kwok-$KWOK_VERSION:$CACHE/controller-gen-$CONTROLLER_TOOLS_VERSION"
}

[ $# -eq 0 ] && set -- all
if [ "$*" != path ]; then
  # One build at a time per cache; the lock is released when this script exits.
  exec 9>"$CACHE/.build.lock"
  flock 9
fi
for what in "$@"; do
  case $what in
    all) install_debian; build_otelcol; build_etcd; build_helm; build_controller_gen; build_kubernetes; build_kube_controller_manager; build_loki; build_kwok ;;
    kubernetes|etcd|loki|otelcol|helm|kwok) "build_$what" ;;
    kube-controller-manager) build_kube_controller_manager ;;
    controller-gen) build_controller_gen ;;
    debian) install_debian ;;
    path) print_path ;;
    *) echo "unknown component: $what" >&2; exit 2 ;;
  esac
done
