#!/bin/sh
# device-check.sh: what a machine with a real GPU runs to check Tessera's
# kernels there, in under ten minutes (`make device-check`):
#
#   1. the Vulkan loader (libvulkan1) and a C compiler, installed if missing
#      (the GPU's own driver must be there already);
#   2. golden tokens through WebGPU on the machine's first adapter: the
#      golden and cross-backend tests of runtime;
#   3. `tessera bench` (int4, multi-step decoding as by default) on
#      synthetic smollm2-135m, qwen2.5-0.5b and llama-3.2-1b, printed as one
#      table: decode and prompt tok/s, dispatches per decode token, the
#      fraction of the copy-bandwidth bound decode reaches.
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

echo "== tessera bench (int4, 32 prompt tokens, 64 decoded)"
printf '%-28s %12s %12s %12s %10s\n' model "decode tok/s" "prompt tok/s" "dispatches" "bw frac"
for m in $models; do
	[ -f "$m" ] || continue
	"$dir/tessera" bench --model "$m" --device webgpu --quant int4 --prompt-tokens 32 --gen-tokens 64 >"$dir/bench.txt" 2>&1 || {
		cat "$dir/bench.txt" >&2
		exit 1
	}
	awk -v m="$(basename "$m")" '
		/^prompt / { for (i = 1; i <= NF; i++) if ($i == "tok/s,") p = $(i - 1) }
		/^decode / { for (i = 1; i <= NF; i++) if ($i == "tok/s") d = $(i - 1) }
		/^dispatches/ { n = $2 }
		/^bandwidth/ { f = $NF }
		END { printf "%-28s %12s %12s %12s %10s\n", m, d, p, n, f }' "$dir/bench.txt"
done
