#!/usr/bin/env bash
# build.sh OUTDIR: compile the CUDA programs into OUTDIR with whatever nvcc there is:
# $NVCC, else nvcc in $PATH, else the CUDA 11.8 toolkit from Debian, fetched once into
# the cache by nvcc-from-debian.sh (no GPU is needed to compile). `make cuda` and
# `make test` call it, so CI proves that the sources compile for sm_80 and sm_90
# (and test/gpu/fault.cu for sm_90).
set -euo pipefail
OUT=${1:?usage: build.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")"
if [ -n "${NVCC:-}" ]; then
  nvcc=$NVCC
elif command -v nvcc >/dev/null 2>&1; then
  nvcc=$(command -v nvcc)
else
  echo "cuda: no nvcc in \$PATH; using Debian's CUDA 11.8 toolkit (downloaded once, ~70 s, 1.1 GB kept in the cache)" >&2
  line=$(./nvcc-from-debian.sh | tail -1)
  # line: PATH=<root>/usr/bin:$PATH make -C cuda NVCC=<nvcc>
  nvcc=${line##*NVCC=}
  export PATH="${nvcc%/lib/nvidia-cuda-toolkit/bin/nvcc}/bin:$PATH"
fi
start=$(date +%s)
make --no-print-directory NVCC="$nvcc" BIN="$OUT"
# The application error test/gpu/record.sh provokes on a GPU machine: compiled here
# too, so a change that breaks it fails CI rather than a GPU machine's short lease.
"$nvcc" -O2 -gencode arch=compute_90,code=sm_90 -o "$OUT/fault" ../test/gpu/fault.cu
echo "cuda: built $OUT/pciebw, $OUT/dgemm and $OUT/fault with $("$nvcc" --version | tail -1) in $(( $(date +%s) - start )) s" >&2
