#!/bin/sh
# device-check.sh: what a machine with a real GPU runs to check Tessera's
# kernels there, in under ten minutes (`make device-check`):
#
#   1. the Vulkan loader (libvulkan1) and a C compiler, installed if missing
#      (the GPU's own driver must be there already);
#   2. golden tokens through WebGPU on the machine's first adapter: the
#      golden and cross-backend tests of runtime;
#   3. `tessera bench` and `tessera profile` (int4, multi-step decoding as
#      by default) on synthetic smollm2-135m, qwen2.5-0.5b and llama-3.2-1b,
#      printed as one table: decode and prompt tok/s, dispatches per decode
#      token, the fraction of the copy-bandwidth bound decode reaches, the
#      ms a token's ops take timed one by one and the busiest op kind; each
#      model's whole profile follows the table.
#
# DEVICE_CHECK_QUICK=1 runs stories260K and smollm2-135m only (a minute or
# two on lavapipe, the CPU's Vulkan driver); DEVICE_CHECK_DIR keeps the
# synthetic models between runs (default: a temporary folder).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/tessera-xdg}"
mkdir -p "$XDG_RUNTIME_DIR"

if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
	"$here/apt-ensure.sh" device-check libvulkan1 gcc libc6-dev
fi

dir="${DEVICE_CHECK_DIR:-$(mktemp -d)}"
mkdir -p "$dir"
go build -o "$dir/tessera" ./examples/tessera
"$dir/tessera" info --device

echo "== golden tokens through WebGPU"
CI=true go test -count=1 -run 'TestGoldenGreedyWebGPU|TestWebGPUMatchesCPU' ./runtime/

shapes="smollm2-135m qwen2.5-0.5b llama-3.2-1b"
models="${MODELS:-../shared/models}/stories260K.gguf"
if [ "${DEVICE_CHECK_QUICK:-}" = 1 ]; then
	shapes="smollm2-135m"
fi
for s in $shapes; do
	if [ ! -f "$dir/$s.gguf" ]; then
		"$dir/tessera" synth --shape "$s" --out "$dir/$s.gguf" >/dev/null
	fi
	models="$models $dir/$s.gguf"
done

echo "== tessera bench and profile (int4, 32 prompt tokens, 64 decoded; profile 16)"
: >"$dir/profiles.txt"
printf '%-22s %12s %12s %10s %8s %10s %16s\n' model "decode tok/s" "prompt tok/s" dispatches "bw frac" "ops ms" "busiest op"
for m in $models; do
	[ -f "$m" ] || continue
	for cmd in "bench --gen-tokens 64" "profile --gen-tokens 16"; do
		# shellcheck disable=SC2086 # cmd is a command and its flag
		"$dir/tessera" $cmd --model "$m" --device webgpu --quant int4 --prompt-tokens 32 >"$dir/out.txt" 2>&1 || {
			cat "$dir/out.txt" >&2
			exit 1
		}
		case $cmd in
		bench*) cp "$dir/out.txt" "$dir/bench.txt" ;;
		*) { echo "-- $(basename "$m")"; cat "$dir/out.txt"; } >>"$dir/profiles.txt" ;;
		esac
	done
	awk -v m="$(basename "$m")" '
		FNR == NR && /^prompt / { for (i = 1; i <= NF; i++) if ($i == "tok/s,") p = $(i - 1) }
		FNR == NR && /^decode / { for (i = 1; i <= NF; i++) if ($i == "tok/s") d = $(i - 1) }
		FNR == NR && /^dispatches/ { n = $2 }
		FNR == NR && /^bandwidth/ { f = $NF }
		FNR != NR && /^decode token/ { for (i = 1; i <= NF; i++) if ($i == "to") t = $(i + 1) }
		FNR != NR && /^op / { top = 1; next }
		FNR != NR && top == 1 { busy = $1 " " $4; top = 2 }
		END { printf "%-22s %12s %12s %10s %8s %10s %16s\n", m, d, p, n, f, t, busy }' "$dir/bench.txt" "$dir/out.txt"
done
echo
cat "$dir/profiles.txt"
