#!/usr/bin/env bash
# nvcc-from-debian.sh: get a CUDA compiler without installing anything system-wide, to
# check that the sources in this directory compile (compiling needs no GPU).
#
# It downloads Debian 12's nvidia-cuda-toolkit (non-free, CUDA 11.8, ~1.6 GB) and its
# dependencies with a private apt configuration (the system's sources, lists and
# dpkg state are not touched), unpacks them under $DIR, points nvcc's profile there,
# and prints the make command to use. Run as any user with network access to Debian.
#
#   cuda/nvcc-from-debian.sh [DIR]      # DIR defaults to ${XDG_CACHE_HOME:-~/.cache}/faultline/cuda-11.8
set -euo pipefail
DIR=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/faultline/cuda-11.8}
ROOT=$DIR/root
NVCC=$ROOT/usr/lib/nvidia-cuda-toolkit/bin/nvcc
log() { printf '[nvcc] %s\n' "$*" >&2; }

if [ ! -x "$NVCC" ] || [ ! -f "$DIR/.done" ]; then
  mkdir -p "$DIR/apt/lists/partial" "$DIR/apt/cache/archives/partial" "$DIR/apt/sources.d" "$ROOT"
  cat >"$DIR/apt/sources.list" <<SOURCES
deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware
deb http://deb.debian.org/debian bookworm-updates main contrib non-free non-free-firmware
SOURCES
  cat >"$DIR/apt/apt.conf" <<CONF
Dir::Etc::SourceList "$DIR/apt/sources.list";
Dir::Etc::SourceParts "$DIR/apt/sources.d";
Dir::State::Lists "$DIR/apt/lists";
Dir::Cache "$DIR/apt/cache";
CONF
  export APT_CONFIG=$DIR/apt/apt.conf
  log "apt-get update (private lists in $DIR/apt)"
  apt-get update -qq
  log "downloading nvidia-cuda-toolkit and its dependencies"
  # Only the packages this system lacks are downloaded; nothing is installed.
  apt-get install --download-only -y -qq --no-install-recommends nvidia-cuda-toolkit >/dev/null
  log "unpacking into $ROOT"
  for deb in "$DIR"/apt/cache/archives/*.deb; do dpkg -x "$deb" "$ROOT"; done
  # The unpacked tree is what is used; the 1.6 GB of archives are not kept, nor the
  # libraries these programs do not link (cuFFT, cuSOLVER, cuSPARSE, cuRAND, NPP,
  # NVRTC) and the static archives other than the CUDA runtime's: 5 GB down to ~1.3 GB.
  rm -f "$DIR"/apt/cache/archives/*.deb
  lib=$ROOT/usr/lib/x86_64-linux-gnu
  rm -f "$lib"/libcufft* "$lib"/libcusolver* "$lib"/libcusparse* "$lib"/libcurand* \
    "$lib"/libnpp* "$lib"/libnvrtc* "$lib"/libnvperf* "$lib"/libnvblas*
  find "$lib" -maxdepth 1 -name '*_static*.a' ! -name 'libcudart_static.a' -delete
  # The packaged profile is a symlink to /etc/nvcc.profile with absolute paths.
  rm -f "$ROOT/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile"
  cat >"$ROOT/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile" <<PROFILE
NVVMIR_LIBRARY_DIR = $ROOT/usr/lib/nvidia-cuda-toolkit/libdevice
PATH += $ROOT/usr/lib/nvidia-cuda-toolkit/bin:$ROOT/usr/bin:
INCLUDES += -I$ROOT/usr/include \$(_SPACE_)
LIBRARIES =+ \$(_SPACE_) -L$ROOT/usr/lib/x86_64-linux-gnu/stubs -L$ROOT/usr/lib/x86_64-linux-gnu
PROFILE
  touch "$DIR/.done"
fi
# Recent glibc releases declare the C23 functions cospi, sinpi and rsqrt (and their float
# forms) with noexcept in C++; CUDA 11.8's headers declare them without, and nvcc
# refuses the mismatch ("exception specification is incompatible"). Declaring them
# noexcept too, as later CUDA releases do, fits both older and newer glibc.
# Their host-side declarations and definitions (the __func__ ones) must say the
# same, or the host compiler refuses the declarations made noexcept above ("has a
# different exception specifier") where glibc does not declare these functions
# (glibc 2.36 of Debian 12).
math=$ROOT/usr/include/crt/math_functions.h
if [ -f "$math" ] && ! grep -q 'cospi(double x) noexcept' "$math"; then
  sed -i -E 's/^(extern __DEVICE_FUNCTIONS_DECL__ __device_builtin__ (double|float) +(cospi|sinpi|rsqrt)f?\((double|float) x\));$/\1 noexcept (true);/' "$math"
  log "declared cospi, sinpi and rsqrt noexcept in $math (recent glibc declares them too)"
fi
if [ -f "$math" ] && ! grep -q 'cospi(double a) noexcept' "$math"; then
  sed -i -E 's/^(__func__\((double|float) (cospi|sinpi|rsqrt)f?\((double|float) a\))\);$/\1 noexcept (true));/' "$math"
  sed -i -E 's/^(__func__\((double|float) (cospi|sinpi|rsqrt)f?\((const )?(double|float) a\))\)$/\1 noexcept (true))/' "${math%.h}.hpp"
  log "declared their host forms noexcept too in $math and ${math%.h}.hpp"
fi
"$NVCC" --version | tail -1 >&2
# nvcc 11.8 wants gcc 11 as host compiler; Debian ships it with the toolkit, in $ROOT/usr/bin.
echo "PATH=$ROOT/usr/bin:\$PATH make -C cuda NVCC=$NVCC"
