# Sourced by record.sh and app-errors.sh: the scratch folder, the output folder and
# the step runner they share. Needs BUNDLE and OUT set (their two arguments).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUNDLE=$(cd "$BUNDLE" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
R=$WORK/rec
mkdir -p "$R/bin"
: >"$R/timings.txt"
export CUDA_DEVICE_ORDER=PCI_BUS_ID
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

ms() { date +%s%3N; }
log() { echo "[$(date -u +%T)] $*" | tee -a "$R/record.log" >&2; }

# step NAME CMD...: run CMD with stdout/stderr/exit status in $R/NAME.*, and its
# wall time in timings.txt.
step() {
	local name=$1 s e rc
	shift
	s=$(ms)
	"$@" >"$R/$name.out" 2>"$R/$name.err"
	rc=$?
	e=$(ms)
	echo "$rc" >"$R/$name.exit"
	printf '%-28s %7d ms  exit %d\n' "$name" $((e - s)) "$rc" >>"$R/timings.txt"
	log "$name: exit $rc in $((e - s)) ms"
	return 0
}

# pack puts all of rec/ but the programs into OUT/recording.tar.gz, with the log and
# the timings beside it.
pack() {
	tar -C "$WORK" --exclude rec/bin -czf "$OUT/recording.tar.gz" rec
	cp "$R/record.log" "$R/timings.txt" "$OUT/" 2>/dev/null
	log "packed $(du -h "$OUT/recording.tar.gz" | cut -f1) into recording.tar.gz"
}

# gpus writes nvidia-smi -L into gpus.txt, or packs and exits 3 without a GPU.
gpus() {
	if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >"$R/gpus.txt" 2>&1; then
		log "no NVIDIA GPU here: nvidia-smi is missing or sees no GPU ($(head -c 200 "$R/gpus.txt" 2>/dev/null))"
		pack
		exit 3
	fi
}

# unbundle unpacks the probe agent and kmsgdump from BUNDLE (test/gpu/bundle.sh).
AGENT=$R/bin/faultline-probe-agent
unbundle() {
	gunzip -c "$BUNDLE/faultline-probe-agent.gz" >"$AGENT" && chmod +x "$AGENT"
	gunzip -c "$BUNDLE/kmsgdump.gz" >"$R/bin/kmsgdump" && chmod +x "$R/bin/kmsgdump"
}
