#!/usr/bin/env bash
# app-errors.sh BUNDLE OUTDIR: on a machine with an NVIDIA GPU, provoke the application
# errors of fault.cu one after another (an illegal address, a misaligned read, a trap,
# a kernel killed while it runs) while the probe agent watches NVML events, check the
# GPU with the nvml check after each and with dgemm at the end, and read the kernel
# log with the exporter's reader: the driver's real Xid lines and NVML's events for
# them. Outputs as record.sh's (OUTDIR/recording.tar.gz); exit 3 without a GPU.
set -uo pipefail
BUNDLE=${1:?usage: app-errors.sh BUNDLE OUTDIR}
OUT=${2:?usage: app-errors.sh BUNDLE OUTDIR}
. "$(dirname "$0")/lib.sh"
gpus
unbundle
step build-fault "$NVCC" -O2 -arch=sm_90 -o "$R/bin/fault" "$ROOT/test/gpu/fault.cu"
step build-cuda make -C "$ROOT/cuda" --no-print-directory NVCC="$NVCC" ARCHS=90 PTX_ARCH=90 BIN="$R/bin"
[ -x "$R/bin/fault" ] && [ -x "$R/bin/dgemm" ] || { log "build failed: $(tail -3 "$R/build-fault.err" "$R/build-cuda.err")"; pack; exit 4; }
"$AGENT" nvml-events --for 20s --clock-interval 1m >"$R/nvml-events.out" 2>"$R/nvml-events.err" &
ev=$!
sleep 1
for mode in illegal-address misaligned trap; do
	step "fault-$mode" "$R/bin/fault" "$mode"
	step "nvml-after-$mode" "$AGENT" check nvml --format json
	sleep 1
done
"$R/bin/fault" spin >"$R/fault-spin.out" 2>"$R/fault-spin.err" &
sp=$!
sleep 2
kill -9 "$sp" 2>/dev/null
wait "$sp" 2>/dev/null
log "fault-spin killed"
sleep 2
step nvml-after-spin "$AGENT" check nvml --format json
step dgemm-after "$AGENT" check dgemm --force --command dgemm="$R/bin/dgemm" --format json
wait $ev
log "nvml-events: $(wc -l <"$R/nvml-events.out") lines"
step kmsgdump timeout 20 "$R/bin/kmsgdump"
step kmsg-raw timeout 20 dd if=/dev/kmsg of="$R/kmsg.raw" iflag=nonblock bs=64k
step nvidia-smi nvidia-smi
pack
log "done"
