#!/usr/bin/env bash
# bundle.sh [DIR]: build, on the build machine, the programs test/gpu/record.sh runs
# on the GPU machine and cannot build there (no Go toolchain, no module downloads):
# the probe agent (cgo, for go-nvml, which loads the driver's libnvidia-ml.so.1 at run
# time) and kmsgdump, for x86-64, stripped and gzipped to travel light. DIR defaults
# to bin/gpu-bundle (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-bin/gpu-bundle}
mkdir -p "$DIR"
export CGO_ENABLED=1 GOOS=linux GOARCH=amd64
go build -trimpath -ldflags="-s -w" -o "$DIR/faultline-probe-agent" ./cmd/faultline-probe-agent
go build -trimpath -ldflags="-s -w" -o "$DIR/kmsgdump" ./test/gpu/kmsgdump
gzip -9f "$DIR/faultline-probe-agent" "$DIR/kmsgdump"
ls -l "$DIR"
