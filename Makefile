# Tessera's everyday commands. `make run` tells a story, `make check` is the
# quick loop (under 3 minutes), `make test` installs what the tests need and
# runs them all (what CI runs).

GO       ?= go
SHARED   ?= ../shared
MODELS   ?= $(SHARED)/models
MODEL    ?= $(MODELS)/stories260K.gguf
PROMPT   ?=
STEPS    ?= 200
DEVICE   ?= auto
export XDG_RUNTIME_DIR ?= /tmp/tessera-xdg

.PHONY: run test test-js check deps vet vet-quick fuzz bench build web desktop clean

# DEFAULT_REF is what `make run` runs when there is no MODEL file: the same
# stories260K as a GGUF on the Hugging Face Hub, in the repository llama.cpp's
# CI uses (https://huggingface.co/ggml-org/test-model-stories260K,
# stories260K-f32.gguf, 1,185,376 bytes, sha256 270cba1b...d3bd256d: the bytes
# of ../shared/models/stories260K.gguf). It is pulled into the model cache
# ($TESSERA_CACHE, default ~/.cache/tessera) once and read from there after.
DEFAULT_REF ?= hf.co/ggml-org/test-model-stories260K:F32

run:
	@model="$(MODEL)"; \
	if [ ! -e "$$model" ] && [ "$(origin MODEL)" = file ]; then \
		echo "make run: no $(MODEL); running $(DEFAULT_REF) from the model cache, pulled from Hugging Face if it is not there yet"; \
		model="$(DEFAULT_REF)"; \
	else \
		echo "make run: running $$model"; \
	fi; \
	set -x; $(GO) run ./examples/tessera run --model "$$model" --steps $(STEPS) --device $(DEVICE) --prompt "$(PROMPT)"

# deps installs what the tests need on Debian (as root) and downloads modules.
deps:
	@mkdir -p "$(XDG_RUNTIME_DIR)"
	@if [ -x .ci/install-deps.sh ]; then .ci/install-deps.sh; fi
	$(GO) mod download

vet: vet-quick
	CGO_ENABLED=0 $(GO) vet ./...

# TESTSUM runs `go test -json` through .ci/testsum, which prints a line per
# package as it finishes, each top-level test slower than 5 s, every minute
# the tests still running, a failing test's whole output, and at the end the
# counts and the slowest tests; its exit status is go test's. TESTSUM="$(GO)
# test" gives go test's own output.
TESTSUM ?= GO="$(GO)" $(GO) run ./.ci/testsum --

test: deps vet test-arm64 test-js test-avx2
	$(TESTSUM) -count=1 -timeout 30m ./...

# test-js runs the tests that build only for the browser (GOOS=js: the
# browser home's request translation against runtime/wire's tables) under
# Node, through Go's own wasm exec wrapper.
test-js:
	GOOS=js GOARCH=wasm $(GO) test -count=1 -exec "$$($(GO) env GOROOT)/lib/wasm/go_js_wasm_exec" ./wasm/browser

# test-avx2 runs the CPU backend's tests, and the engine on a model of
# every block type against llama.cpp's log-probabilities, with AVX-512
# hidden (GODEBUG=cpu.avx512f=off): on the AVX-512 machines CI runs on,
# the AVX2 kernels that most desktops run (the one-row loops, the wide
# kernel's AVX2 form, with AVX-VNNI where the CPU has it, and the
# backend's choice of them) then run end to end, not only against their
# twins (TestDotBlocksWide runs the plain AVX2 form against them on any
# CPU). TESSERA_KERNELS makes the kernel tests check that AVX2's ran.
.PHONY: test-avx2
test-avx2:
	@if [ "$$($(GO) env GOARCH)" != amd64 ] || ! grep -qw avx2 /proc/cpuinfo 2>/dev/null; then \
		echo "test-avx2: no AVX2 here"; exit 0; fi; \
	GODEBUG=cpu.avx512f=off TESSERA_KERNELS=avx2 $(GO) test -count=1 -timeout 10m ./runtime/cpu/... && \
	GODEBUG=cpu.avx512f=off $(GO) test -count=1 -timeout 10m -run 'TestQuantizedMatchLlamaCpp$$' ./examples/tessera/

# check is the quick loop, under 3 minutes on a 2-core machine: gofmt and
# go vet, every package's tests with -short except the slow ones below
# (CHECK_SLOW: their tests load models or build programs; -short skips the
# tests of the others that build and run whole programs, npm and Node, or
# megabytes of text), and the golden story: llama2.c's greedy tokens of
# stories260K through the engine on the CPU and on WebGPU (lavapipe where
# there is no GPU), plus CHECK_RUNTIME's selection of the engine's tests.
# `make test` runs everything, -short or not.
CHECK_SLOW    ?= runtime|runtime/gpu|runtime/server|host|web/e2e|examples/tessera|examples/desktop
CHECK_RUNTIME ?= ^(TestGoldenGreedy|TestGoldenGreedyWebGPU|TestPromptContinuation)$$
CHECKFLAGS    ?= -count=1 -timeout 5m
check: vet-quick
	$(TESTSUM) $(CHECKFLAGS) -short $$($(GO) list ./... | grep -v -x -E "$$($(GO) list -m)/($(CHECK_SLOW))")
	$(TESTSUM) $(CHECKFLAGS) -short -run '$(CHECK_RUNTIME)' ./runtime/

# vet-quick is gofmt's check and go vet; vet adds a second pass with
# CGO_ENABLED=0 (the CPU-only build).
vet-quick:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

# test-arm64 checks the arm64 build of the CPU backend: it vets and
# cross-builds runtime/cpu for linux and darwin arm64, then runs under
# qemu-aarch64 (.ci/install-qemu.sh installs it) the CPU kernels' tests as
# arm64 binaries, the NEON assembly against its Go twins and then the twins
# alone (-tags purego; TESSERA_KERNELS makes each run check which kernels it
# ran), and llama2.c's greedy tokens of stories260K on the CPU backend of a
# CPU-only (CGO_ENABLED=0) arm64 build. Without qemu-aarch64 it only builds,
# unless CI is set: there it fails. Before those, .ci/fma-check: no fused
# multiply-add in tessera's arm64 code, which would round otherwise than
# amd64 and the Go twins.
QEMU_ARM64 ?= qemu-aarch64 -cpu max
.PHONY: test-arm64
test-arm64:
	GOARCH=arm64 $(GO) vet ./runtime/cpu/...
	GOOS=darwin GOARCH=arm64 $(GO) build ./runtime/cpu/...
	GO=$(GO) .ci/fma-check
	@for tool in $(firstword $(QEMU_ARM64)); do \
		if ! command -v $$tool >/dev/null 2>&1; then \
			if [ -n "$$CI" ]; then echo "test-arm64: no $$tool (.ci/install-qemu.sh installs it)" >&2; exit 1; fi; \
			echo "test-arm64: no $$tool (.ci/install-qemu.sh installs it): arm64 built, not run"; exit 0; \
		fi; \
	done; \
	set -x; \
	TESSERA_KERNELS=neon GOARCH=arm64 $(GO) test -count=1 -timeout 10m -exec '$(QEMU_ARM64)' ./runtime/cpu/internal/kernel/ && \
	TESSERA_KERNELS=go GOARCH=arm64 $(GO) test -count=1 -timeout 10m -tags purego -exec '$(QEMU_ARM64)' ./runtime/cpu/internal/kernel/ && \
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 -timeout 10m -exec '$(QEMU_ARM64)' -run 'TestGoldenGreedy$$|TestPromptContinuation$$' ./runtime/

# fuzz runs every fuzzer for FUZZTIME each (default 1m; 14 of them), each
# under a memory ceiling of FUZZMEM KiB of address space (default 4 GiB;
# the instrumented test binary is built first without it, since compiling
# the SDKs some tests import takes more):
# what a request, a model file, a tokenizer, a cache index or a plugin
# sends. A crash's input is kept under the package's testdata/fuzz/, which
# `go test` (and so `make test`) runs as a regression case.
FUZZTIME ?= 1m
FUZZMEM  ?= 4194304
FUZZERS  ?= \
	runtime/grammar:FuzzGBNF runtime/grammar:FuzzRegex runtime/grammar:FuzzJSONSchema runtime/grammar:FuzzParse \
	runtime/server:FuzzDecodeRequest \
	models/tokenizer:FuzzEncode models/tokenizer:FuzzLoadTokenizerJSON models/tokenizer:FuzzReadLlama2c models/tokenizer:FuzzParseModelProto \
	models/gguf:FuzzRead models/safetensors:FuzzRead models:FuzzParseHFConfig \
	models/hub:FuzzCacheIndex \
	host:FuzzHostCalls
fuzz:
	@for f in $(FUZZERS); do \
		pkg=./$${f%%:*}; name=$${f##*:}; \
		echo "fuzz: $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=1x $$pkg >/dev/null || exit 1; \
		( ulimit -v $(FUZZMEM) && $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) $$pkg ) || exit 1; \
	done

bench:
	$(GO) test -run='^$$' -bench=. -benchtime=1x ./...

# device-check is what a machine with a real GPU runs (under ten minutes):
# golden tokens through WebGPU and `tessera bench` of synthetic
# smollm2-135m, qwen2.5-0.5b and llama-3.2-1b in int4 and qwen3-0.6b at
# Q4_K_M, greedy and sampled, as one table, and decode at concurrency 1, 8
# and 32;
# DEVICE_CHECK_SERVE=1 adds bench-serve through `tessera serve`,
# DEVICE_CHECK_LORA=1 the LoRA decode benchmark. DEVICE_CHECK_QUICK=1 runs
# a smaller set (lavapipe).
.PHONY: device-check device-bundle
device-check:
	MODELS=$(MODELS) .ci/device-check.sh

# device-bundle builds what device-check runs into .device/ (git-ignored),
# for a GPU machine without Go: the tessera command and runtime's test
# binary, xz-compressed, and the test models. There:
# DEVICE_CHECK_BUNDLE=.device .ci/device-check.sh
device-bundle:
	rm -rf .device && mkdir -p .device
	$(GO) build -trimpath -ldflags='-s -w' -o .device/tessera ./examples/tessera
	$(GO) test -c -trimpath -ldflags='-s -w' -o .device/runtime.test ./runtime
	xz -T0 -6 .device/tessera .device/runtime.test
	cp -r $(MODELS) .device/models
	@du -sh .device

build:
	$(GO) build -o bin/tessera ./examples/tessera

# plugin builds the example plugin, a WASI reactor (docs/PLUGIN_ABI.md),
# and the example host that runs it: bin/story.wasm and bin/plugin-host.
.PHONY: plugin
plugin:
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o bin/story.wasm ./examples/plugin/story
	$(GO) build -o bin/plugin-host ./examples/plugin/host
	@echo "run it: bin/plugin-host --model $(MODEL) --plugin bin/story.wasm --device $(DEVICE) --prompt 'Once upon a time'"

# web builds the browser engine (web/pkg/tessera.wasm) and copies Go's loader
# for it; `go run ./examples/tessera web --models $(MODELS)` then serves the
# demo at http://127.0.0.1:8080/.
web:
	GOOS=js GOARCH=wasm CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o web/pkg/tessera.wasm ./wasm/browser
	@goroot=$$($(GO) env GOROOT); \
	if [ -f "$$goroot/lib/wasm/wasm_exec.js" ]; then cp "$$goroot/lib/wasm/wasm_exec.js" web/pkg/; \
	else cp "$$goroot/misc/wasm/wasm_exec.js" web/pkg/; fi
	@echo "built web/pkg/tessera.wasm; serve it with: $(GO) run ./examples/tessera web --models $(MODELS)"

# pkg packs the JavaScript package (web/pkg: tessera-web, with the wasm)
# into web/pkg/tessera-web-VERSION.tgz with npm pack, the tarball `npm publish`
# would upload (web/pkg_test.go installs it and runs it in Node).
.PHONY: pkg
pkg: web
	cd web/pkg && npm pack
	@cd web/pkg && gzip -9c tessera.wasm | wc -c | awk '{printf "tessera.wasm: %.2f MB gzipped\n", $$1/1e6}'

# desktop builds the Cogent Core chat window (examples/desktop) and opens it
# with MODEL on DEVICE. Building needs the X11 and GL headers that
# .ci/install-desktop.sh installs (Debian, as root).
desktop:
	$(GO) build -o bin/tessera-desktop ./examples/desktop
	./bin/tessera-desktop --model "$(MODEL)" --device $(DEVICE)

clean:
	rm -rf bin web/pkg/tessera.wasm web/pkg/wasm_exec.js web/pkg/*.tgz
