# faultline — build, test and run everything from here.
# `make test` is what CI runs (.ci/run): it builds the pinned real components it needs
# (cached outside the checkout, see test/tools/build.sh) and runs every test.

GO        ?= go
BIN       ?= bin
PKGS      := ./...
GOTESTFLAGS ?=
# go-nvml's mock and the NVML bindings need cgo.
export CGO_ENABLED ?= 1
export GOTOOLCHAIN ?= local

.PHONY: all build build-cgo cuda test test-unit lint bench tools rules-test fuzz clean

all: build

# bin/faultline is static (no cgo): the controller, exporter and CLI image. The probe
# agent's image needs cgo for NVML: bin/cgo/faultline (make build-cgo), same source.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/faultline ./cmd/faultline

## cuda: compile the CUDA programs of the pciebw and dgemm probes (bin/cuda/)
cuda:
	cuda/build.sh $(BIN)/cuda

build-cgo:
	CGO_ENABLED=1 $(GO) build -trimpath -o $(BIN)/cgo/faultline ./cmd/faultline

## tools: build or install the pinned real components (kube-apiserver, etcd, Loki, collector, helm, kubectl, Debian packages)
tools:
	test/tools/build.sh all

## test: everything CI runs — lint, unit and integration tests against real components, pack tests
test: tools lint build cuda
	$(BIN)/faultline rules test rules/packs
	FAULTLINE_TOOLS_PATH="$$(test/tools/build.sh path)" $(GO) test -count=1 -timeout 60m $(GOTESTFLAGS) $(PKGS)

## test-unit: the quick loop; integration tests say they were skipped
test-unit:
	$(GO) test -short -count=1 $(GOTESTFLAGS) $(PKGS)

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'; git ls-files --others --exclude-standard '*.go'))"; \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: run the benchmarks (reported, never gated on time)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./rules/... ./dmesg-exporter/...

## fuzz: run each fuzz target for FUZZTIME (seeds alone run in `make test`)
FUZZTIME ?= 30s
FUZZ_TARGETS := ./rules:FuzzLoad ./rules/logline:FuzzParseLine \
	./dmesg-exporter/kmsg:FuzzParse ./dmesg-exporter/kmsg:FuzzReaderStream \
	./dmesg-exporter/cri:FuzzParseLine ./dmesg-exporter/cri:FuzzReassembler
fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $${t#*:} in $${t%%:*}"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}" || exit 1; \
	done

rules-test: build
	$(BIN)/faultline rules test rules/packs

clean:
	rm -rf $(BIN)
