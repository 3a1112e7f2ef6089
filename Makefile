# Tessera's everyday commands. `make run` tells a story, `make test` installs
# what the tests need and runs them.

GO       ?= go
SHARED   ?= ../shared
MODELS   ?= $(SHARED)/models
MODEL    ?= $(MODELS)/stories260K.gguf
PROMPT   ?=
STEPS    ?= 200
DEVICE   ?= auto
export XDG_RUNTIME_DIR ?= /tmp/tessera-xdg

.PHONY: run test deps vet fuzz bench build clean

run:
	@if [ ! -f "$(MODEL)" ]; then \
		echo "No model at $(MODEL)."; \
		echo "Get Karpathy's tinyllamas stories260K (stories260K.bin and tok512.bin, or a GGUF of it)"; \
		echo "and run: make run MODEL=path/to/stories260K.gguf"; \
		exit 1; \
	fi
	$(GO) run ./examples/tessera run --model "$(MODEL)" --steps $(STEPS) --device $(DEVICE) --prompt "$(PROMPT)"

# deps installs what the tests need on Debian (as root) and downloads modules.
deps:
	@mkdir -p "$(XDG_RUNTIME_DIR)"
	@if [ -x .ci/install-deps.sh ]; then .ci/install-deps.sh; fi
	$(GO) mod download

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

test: deps vet
	$(GO) test -count=1 -timeout 30m ./...

# fuzz runs the GGUF reader's fuzzer for FUZZTIME (default 1m).
FUZZTIME ?= 1m
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzRead -fuzztime=$(FUZZTIME) ./models/gguf/

bench:
	$(GO) test -run='^$$' -bench=. -benchtime=1x ./...

build:
	$(GO) build -o bin/tessera ./examples/tessera

clean:
	rm -rf bin
