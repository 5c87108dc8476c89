#!/usr/bin/env bash
# record.sh BUNDLE OUTDIR: on a machine with NVIDIA GPUs, record what faultline's GPU
# parts see there, for active-probes/checks/testdata/recorded (see test/gpu/README.md).
#
# BUNDLE is the folder test/gpu/bundle.sh made on the build machine (the probe agent
# and kmsgdump, built for x86-64 with cgo and stripped). On the GPU machine it:
#   1. writes the machine's identity: nvidia-smi -q, driver, CUDA, nvcc, kernel;
#   2. builds cuda/ with the nvcc there for sm_90 (Hopper);
#   3. runs pciebw and dgemm on every GPU (defaults, other sizes, error paths);
#   4. runs the agent's checks once through the agent binary (faultline-probe-agent
#      check): nvml, then nvml+pciebw+dgemm of GPU 0 (the sweep), then on all, then
#      dcgm, which has no host engine here and must say so;
#   5. watches NVML events for 10 s through the agent (nvml-events) while dgemm runs
#      and a program of its own makes an illegal address (fault.cu: an application
#      error, the driver's Xid; the GPU stays healthy, which the nvml check after it
#      shows), again with clock changes coalesced, and lists the event types NVML
#      supports per GPU (nvidia-ml-py, when present);
#   6. reads /dev/kmsg with the exporter's reader (kmsgdump) and raw (dd).
# Every output goes to rec/<step>.{out,err,exit} in a scratch folder, timings to
# rec/timings.txt; OUTDIR gets recording.tar.gz (all of rec/ but the programs),
# record.log and timings.txt. Without a GPU it stops at step 1 with exit 3
# and a one-line reason.
set -uo pipefail
BUNDLE=${1:?usage: record.sh BUNDLE OUTDIR}
OUT=${2:?usage: record.sh BUNDLE OUTDIR}
. "$(dirname "$0")/lib.sh"

log "start on $(uname -m), $(nproc) CPUs"
gpus
ngpu=$(grep -c '^GPU ' "$R/gpus.txt")
log "$ngpu GPUs: $(head -1 "$R/gpus.txt")"

# 1. identity
step nvidia-smi-q nvidia-smi -q
step nvidia-smi nvidia-smi
step nvidia-smi-topo nvidia-smi topo -m
step driver-version cat /proc/driver/nvidia/version
step uname uname -a
step dcgm-present sh -c 'command -v dcgmi nv-hostengine; ls /usr/lib/x86_64-linux-gnu/libdcgm* 2>&1'
step nvcc-version "$NVCC" --version

# 2. build
step build make -C "$ROOT/cuda" --no-print-directory NVCC="$NVCC" ARCHS=90 PTX_ARCH=90 BIN="$R/bin"
if [ ! -x "$R/bin/pciebw" ] || [ ! -x "$R/bin/dgemm" ]; then
	log "cuda build failed: $(tail -3 "$R/build.err")"
	pack
	exit 4
fi

# 3. the programs, on every GPU
step pciebw-default "$R/bin/pciebw"
step pciebw-default-2 "$R/bin/pciebw"
step pciebw-64mb "$R/bin/pciebw" --size-mb 64 --iters 10
step pciebw-1gb "$R/bin/pciebw" --size-mb 1024 --iters 5
step pciebw-bad-gpu "$R/bin/pciebw" --gpus "$ngpu"
step pciebw-usage "$R/bin/pciebw" --size-mb x
step dgemm-default "$R/bin/dgemm"
step dgemm-default-2 "$R/bin/dgemm"
step dgemm-n4096 "$R/bin/dgemm" --n 4096 --iters 10
step dgemm-n16384 "$R/bin/dgemm" --n 16384 --iters 5
step dgemm-bad-gpu "$R/bin/dgemm" --gpus "$ngpu"

# 4. the agent's checks, through the agent binary
unbundle
cmds=(--command pciebw="$R/bin/pciebw" --command dgemm="$R/bin/dgemm")
step agent-version "$AGENT" --version
step check-nvml "$AGENT" check nvml --format json
step check-nvml-text "$AGENT" check nvml
step check-nvml-expect8 "$AGENT" check nvml --param nvml.expected_gpus=8 --format json
step check-sweep-gpu0 "$AGENT" check nvml pciebw dgemm --force "${cmds[@]}" \
	--param pciebw.gpus=0 --param dgemm.gpus=0 --format json
step check-sweep-all "$AGENT" check nvml pciebw dgemm --force "${cmds[@]}" --format json
step check-sweep-text "$AGENT" check nvml pciebw dgemm --force "${cmds[@]}"
step check-dcgm "$AGENT" check dcgm --format json

# 5. NVML events for 10 s, with dgemm loading the GPUs from the 2nd to the ~6th
# second and an application's illegal address (fault.cu: the driver's Xid) at the 8th;
# then the same 10 s as the agent ships them (clock changes coalesced)
step build-fault "$NVCC" -O2 -arch=sm_90 -o "$R/bin/fault" "$ROOT/test/gpu/fault.cu"
"$AGENT" nvml-events --for 10s >"$R/nvml-events.out" 2>"$R/nvml-events.err" &
ev=$!
sleep 2
step dgemm-during-events "$R/bin/dgemm" --n 16384 --iters 20
sleep 2
step app-fault "$R/bin/fault" illegal-address
wait $ev
echo $? >"$R/nvml-events.exit"
log "nvml-events: exit $(cat "$R/nvml-events.exit"), $(wc -l <"$R/nvml-events.out") events"
"$AGENT" nvml-events --for 8s --clock-interval 1m >"$R/nvml-events-coalesced.out" 2>"$R/nvml-events-coalesced.err" &
ev=$!
sleep 1
step dgemm-during-coalesced "$R/bin/dgemm" --n 16384 --iters 20
wait $ev
log "nvml-events --clock-interval 1m: $(wc -l <"$R/nvml-events-coalesced.out") lines"
step check-nvml-after-fault "$AGENT" check nvml --format json
if command -v python3 >/dev/null 2>&1; then
	step nvml-event-types python3 "$ROOT/test/gpu/event_types.py"
fi
step nvidia-smi-q-after nvidia-smi -q -d CLOCK,PERFORMANCE,POWER,TEMPERATURE,ECC,PAGE_RETIREMENT,ROW_REMAPPER

# 6. the kernel log
step kmsgdump timeout 20 "$R/bin/kmsgdump"
step kmsg-raw timeout 20 dd if=/dev/kmsg of="$R/kmsg.raw" iflag=nonblock bs=64k
log "done"
pack
