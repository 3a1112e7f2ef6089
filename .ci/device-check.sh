#!/bin/sh
# device-check.sh: what a machine with a real GPU runs to check Tessera's
# kernels there, in under ten minutes (`make device-check`):
#
#   1. the Vulkan loader (libvulkan1) and a C compiler, installed if missing
#      and if Go builds here (the GPU's own driver must be there already);
#   2. golden tokens through WebGPU on the machine's first adapter: the
#      golden and cross-backend tests of runtime;
#   3. `tessera bench` and `tessera profile` (int4, multi-step decoding as
#      by default) on synthetic smollm2-135m, qwen2.5-0.5b and llama-3.2-1b,
#      and qwen3-0.6b quantized to Q4_K_M (at its file's bits), printed as
#      one table: decode and prompt tok/s, dispatches per decode token, the
#      fraction of the copy-bandwidth bound decode reaches, the ms a
#      token's ops take timed one by one and the busiest op kind, and
#      sampled decoding (ollama's defaults: temperature 0.8, top-k 40,
#      top-p 0.9; seed 1, chains of 4): its tok/s, bytes read back and
#      round trips a token; each model's whole profile follows the table.
#      (Without a top-k a random model's flat distribution puts most draws
#      past the device's 256 ranked candidates, where the host draws from
#      the logits; how often a trained model's draws land there depends
#      on how peaked its distributions are.)
#   3b. decode at concurrency 1, 8 and 32 (in-process `tessera bench`,
#      aggregate tok/s) on smollm2-135m and llama-3.2-1b int4 (1 and 8 on
#      the quick run);
#   4. serving (DEVICE_CHECK_SERVE=1): stories260K and smollm2-135m int4
#      through `tessera serve` and `tessera bench-serve` at concurrency 1, 8
#      and 32 (DEVICE_CHECK_CONC) beside the in-process `tessera bench` of
#      the same work;
#   5. LoRA (DEVICE_CHECK_LORA=1): BenchmarkLoRADecode on WebGPU
#      (stories260K, smollm2-135m and qwen3-0.6b), decode tok/s at
#      concurrency 8 with 0, 1 and 4 adapters of rank 8 and 64 (F16, kept
#      in halves; f32; and rank 64 with every GEMV computing its adapters'
#      h, adapters4-inline, which sets shrinkInside's GPU threshold).
#
# A machine without Go runs a bundle built elsewhere: `make device-bundle`
# writes the tessera command, runtime's test binary and the test models
# into .device/ (xz-compressed), and DEVICE_CHECK_BUNDLE=.device makes this
# script use them. Each step has a time limit and a failed step does not
# stop the next; the exit status says whether any failed.
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

dir="${DEVICE_CHECK_DIR:-$(mktemp -d)}"
mkdir -p "$dir"
bundle="${DEVICE_CHECK_BUNDLE:-}"
models="${MODELS:-../shared/models}"
if [ -n "$bundle" ]; then
	# The bundle's test models go where runtime's tests look for them
	# (../../shared/models from the package folder), in a tree of its own.
	mkdir -p "$dir/t/shared" "$dir/t/repo/runtime"
	cp -r "$bundle/models" "$dir/t/shared/models"
	models="$dir/t/shared/models"
	for b in tessera runtime.test; do
		if command -v xz >/dev/null 2>&1; then
			xz -dc "$bundle/$b.xz" >"$dir/$b"
		else
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$bundle/$b.xz" >"$dir/$b"
		fi
		chmod +x "$dir/$b"
	done
	rtdir="$dir/t/repo/runtime"
else
	if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
		"$here/apt-ensure.sh" device-check libvulkan1 gcc libc6-dev
	fi
	go build -o "$dir/tessera" ./examples/tessera
	go test -c -o "$dir/runtime.test" ./runtime
	rtdir="$root/runtime"
fi
tessera="$dir/tessera"
"$tessera" info --device

failed=0
# step LIMIT CMD...: runs CMD for at most LIMIT seconds; a failure is
# reported and counted, not fatal.
step() {
	limit=$1
	shift
	if ! timeout "$limit" "$@"; then
		echo "device-check: failed or timed out ($limit s): $*" >&2
		failed=1
		return 1
	fi
}

echo "== golden tokens through WebGPU"
(cd "$rtdir" && step 180 env CI=true "$dir/runtime.test" -test.count=1 -test.run 'TestGoldenGreedyWebGPU|TestWebGPUMatchesCPU') || failed=1

# jnum KEY FILE: a number from tessera's --json output.
jnum() { sed -n "s/^ *\"$1\": *\([-0-9.e+]*\),\{0,1\}$/\1/p" "$2" | head -n 1; }

shapes="smollm2-135m qwen2.5-0.5b llama-3.2-1b"
kquant="qwen3-0.6b"
list="$models/stories260K.gguf"
if [ "${DEVICE_CHECK_QUICK:-}" = 1 ]; then
	shapes="smollm2-135m" kquant=""
fi
for s in $shapes $kquant; do
	if [ ! -f "$dir/$s.gguf" ]; then
		step 120 "$tessera" synth --shape "$s" --out "$dir/$s.gguf" >/dev/null || continue
	fi
	list="$list $dir/$s.gguf"
done
# The K-quant row: the same shape quantized as llama.cpp's Q4_K_M mix,
# run at its file's bits (no --quant), in place of its f32 file.
for s in $kquant; do
	if [ ! -f "$dir/$s.q4_k_m.gguf" ]; then
		step 240 "$tessera" quantize --model "$dir/$s.gguf" --out "$dir/$s.q4_k_m.gguf" --type q4_k_m >/dev/null || continue
	fi
	list=$(echo "$list" | sed "s|$dir/$s.gguf|$dir/$s.q4_k_m.gguf|")
done

# quantOf FILE: the --quant flag a model runs at: int4 for the float
# files, none (the file's own bits) for a quantized one.
quantOf() {
	case $1 in
	*.q4_k_m.gguf) echo "" ;;
	*) echo "--quant int4" ;;
	esac
}

echo "== tessera bench and profile (int4 or the file's bits, 32 prompt tokens, 64 decoded; profile 16; sampled: temperature 0.8, top-k 40, top-p 0.9, seed 1)"
: >"$dir/profiles.txt"
printf '%-22s %12s %12s %10s %8s %10s %16s %12s %8s %8s\n' model "decode tok/s" "prompt tok/s" dispatches "bw frac" "ops ms" "busiest op" \
	"sampled t/s" "rb B/tok" "rt/tok"
for m in $list; do
	[ -f "$m" ] || continue
	ok=1
	q=$(quantOf "$m")
	for cmd in "bench --gen-tokens 64" "profile --gen-tokens 16"; do
		# shellcheck disable=SC2086 # cmd is a command and its flag, q a flag or nothing
		step 180 "$tessera" $cmd --model "$m" --device webgpu $q --prompt-tokens 32 >"$dir/out.txt" 2>&1 || {
			cat "$dir/out.txt" >&2
			ok=0
			break
		}
		case $cmd in
		bench*) cp "$dir/out.txt" "$dir/bench.txt" ;;
		*) { echo "-- $(basename "$m")"; cat "$dir/out.txt"; } >>"$dir/profiles.txt" ;;
		esac
	done
	[ $ok = 1 ] || continue
	# shellcheck disable=SC2086 # q is a flag or nothing
	step 180 "$tessera" bench --model "$m" --device webgpu $q --prompt-tokens 32 --gen-tokens 64 \
		--temperature 0.8 --top-k 40 --top-p 0.9 --seed 1 --multi-step 4 --json >"$dir/sampled.json" 2>/dev/null || : >"$dir/sampled.json"
	sampled="$(jnum decode_tps "$dir/sampled.json") $(jnum readback_bytes_per_token "$dir/sampled.json") $(jnum round_trips_per_token "$dir/sampled.json")"
	awk -v m="$(basename "$m")" -v s="$sampled" '
		FNR == NR && /^prompt / { for (i = 1; i <= NF; i++) if ($i == "tok/s,") p = $(i - 1) }
		FNR == NR && /^decode / { for (i = 1; i <= NF; i++) if ($i ~ /^tok\/s,?$/) d = $(i - 1) }
		FNR == NR && /^dispatches/ { n = $2; sub(/;$/, "", n) }
		FNR == NR && /^bandwidth/ { f = $NF }
		FNR != NR && /^decode token/ { for (i = 1; i <= NF; i++) if ($i == "to") t = $(i + 1) }
		FNR != NR && /^op / { top = 1; next }
		FNR != NR && top == 1 { busy = $1 " " $4; top = 2 }
		END { split(s, x, " "); printf "%-22s %12s %12s %10s %8s %10s %16s %12.1f %8.0f %8.2f\n", m, d, p, n, f, t, busy, x[1], x[2], x[3] }' "$dir/bench.txt" "$dir/out.txt"
done
echo
cat "$dir/profiles.txt"

concs="1 8 32"
if [ "${DEVICE_CHECK_QUICK:-}" = 1 ]; then
	concs="1 8"
fi
echo "== decode at concurrency $concs (in-process tessera bench, int4, 32 prompt tokens, 64 decoded; aggregate tok/s)"
printf '%-22s' model
for c in $concs; do printf ' %10s' "c=$c"; done
echo
for s in $shapes; do
	case $s in smollm2-135m | llama-3.2-1b) ;; *) continue ;; esac
	m="$dir/$s.gguf"
	[ -f "$m" ] || continue
	printf '%-22s' "$s"
	for c in $concs; do
		step 180 "$tessera" bench --model "$m" --device webgpu --quant int4 --prompt-tokens 32 --gen-tokens 64 \
			--concurrency "$c" --json >"$dir/c.json" 2>/dev/null || : >"$dir/c.json"
		printf ' %10s' "$(jnum aggregate_decode_tps "$dir/c.json" | awk '{ printf "%.1f", $1 }')"
	done
	echo
done

# healthy URL: whether GET URL answers 200 (curl, or Python where there is
# no curl).
healthy() {
	if command -v curl >/dev/null 2>&1; then
		curl -fs "$1" >/dev/null 2>&1
	else
		python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" >/dev/null 2>&1
	fi
}

if [ "${DEVICE_CHECK_SERVE:-}" = 1 ]; then
	echo "== serve: in-process bench against bench-serve through tessera serve (32-token prompts)"
	printf '%-14s %-6s %5s %12s %12s %12s %10s %10s %10s\n' model quant conc "bench tok/s" "serve tok/s" "1/TPOT" "TTFT p50" "ITL p50" "ITL p99"
	port=18080
	for spec in "$models/stories260K.gguf f32 128" "$dir/smollm2-135m.gguf int4 64"; do
		# shellcheck disable=SC2086 # spec is three words
		set -- $spec
		m=$1 q=$2 gen=$3
		[ -f "$m" ] || continue
		port=$((port + 1))
		"$tessera" serve --model "$m" --device webgpu --quant "$q" --addr "127.0.0.1:$port" --log off >"$dir/serve.log" 2>&1 &
		pid=$!
		i=0 up=1
		until healthy "http://127.0.0.1:$port/health"; do
			i=$((i + 1))
			if [ $i -gt 240 ] || ! kill -0 $pid 2>/dev/null; then
				cat "$dir/serve.log" >&2
				failed=1 up=0
				break
			fi
			sleep 0.5
		done
		[ $up = 1 ] && for c in ${DEVICE_CHECK_CONC:-1 8 32}; do
			n=$((c * 4))
			[ $n -ge 8 ] || n=8
			step 120 "$tessera" bench --model "$m" --device webgpu --quant "$q" --prompt-tokens 32 --gen-tokens "$gen" --concurrency $c --json >"$dir/b.json" 2>/dev/null || continue
			step 180 "$tessera" bench-serve --url "http://127.0.0.1:$port" --concurrency $c --requests $n --prompt-tokens 32 --gen-tokens "$gen" --json >"$dir/s.json" 2>/dev/null || continue
			tpot=$(jnum mean_tpot_ms "$dir/s.json")
			printf '%-14s %-6s %5d %12.1f %12.1f %12.1f %10.2f %10.3f %10.3f\n' "$(basename "$m" .gguf)" "$q" $c \
				"$(jnum aggregate_decode_tps "$dir/b.json")" "$(jnum output_throughput "$dir/s.json")" \
				"$(echo "$tpot" | awk '{ print ($1 > 0 ? 1000 / $1 : 0) }')" \
				"$(jnum median_ttft_ms "$dir/s.json")" "$(jnum median_itl_ms "$dir/s.json")" "$(jnum p99_itl_ms "$dir/s.json")"
		done
		kill -TERM $pid 2>/dev/null
		wait $pid 2>/dev/null || true
	done
fi

if [ "${DEVICE_CHECK_LORA:-}" = 1 ]; then
	echo "== LoRA: decode at concurrency 8 with 0, 1 and 4 adapters (BenchmarkLoRADecode, WebGPU)"
	(cd "$rtdir" && step 480 "$dir/runtime.test" -test.run '^$' -test.bench 'LoRADecode/.*/webgpu' -test.benchtime 3x) || failed=1
fi
exit $failed
