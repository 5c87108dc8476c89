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

.PHONY: all build build-faultline build-probe-agent sizes cuda demo test test-unit lint bench bench-scan bench-scale tools rules-test fuzz clean

all: build

# One binary per role, each linking only its own (cmd/faultline/deps_test.go):
# bin/faultline, the controller, the dmesg-exporter and the CLI, static (no cgo), for
# the faultline image; bin/faultline-probe-agent, the probe agent, with cgo for NVML
# (go-nvml), for its own image. Release builds: stripped, without local paths.
RELEASE_FLAGS := -trimpath -ldflags='-s -w'
build: build-faultline build-probe-agent

build-faultline:
	CGO_ENABLED=0 $(GO) build $(RELEASE_FLAGS) -o $(BIN)/faultline ./cmd/faultline

build-probe-agent:
	CGO_ENABLED=1 $(GO) build $(RELEASE_FLAGS) -o $(BIN)/faultline-probe-agent ./cmd/faultline-probe-agent

## sizes: build and print the size of each binary
sizes: build
	@for b in $(BIN)/faultline $(BIN)/faultline-probe-agent; do \
	  printf '%-28s %6d KiB\n' "$$b" $$(( $$(stat -c %s "$$b") / 1024 )); done

## cuda: compile the CUDA programs of the pciebw and dgemm probes (bin/cuda/)
cuda:
	cuda/build.sh $(BIN)/cuda

## demo: faultline's main job on this machine with the real components (cmd/faultline-demo,
## its own program: the faultline binary links neither the test harness nor testing)
## (its probe agents run in-process on go-nvml's mock: cgo)
DEMO_FLAGS ?=
demo: build-faultline
	CGO_ENABLED=1 $(GO) build $(RELEASE_FLAGS) -o $(BIN)/faultline-demo ./cmd/faultline-demo
	$(BIN)/faultline-demo --faultline $(BIN)/faultline $(DEMO_FLAGS)

## tools: build or install the pinned real components (kube-apiserver, etcd, Loki, collector, helm, kubectl, kwok, Debian packages)
tools:
	test/tools/build.sh all

## test: everything CI runs — lint, unit and integration tests against real components, pack tests
test: tools lint build cuda
	$(BIN)/faultline rules test --no-default-packs rules/packs
	FAULTLINE_TOOLS_PATH="$$(test/tools/build.sh path)" $(GO) test -count=1 -timeout 60m $(GOTESTFLAGS) $(PKGS)
	cd collector && $(GO) test -count=1 $(GOTESTFLAGS) ./...

## test-unit: the quick loop; integration tests say they were skipped
test-unit:
	$(GO) test -short -count=1 $(GOTESTFLAGS) $(PKGS)
	cd collector && $(GO) test -short -count=1 $(GOTESTFLAGS) ./...

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go'; git ls-files --others --exclude-standard '*.go'))"; \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	# faultline's collector components are a module of their own (collector/go.mod).
	cd collector && $(GO) vet ./...

## bench: run the benchmarks (reported, never gated on time)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./rules/... ./dmesg-exporter/...

## bench-scan: faultline scan against GNU grep -E on a generated 100 MB kernel log (ratio reported, never gated)
SCAN_BENCH_MB ?= 100
bench-scan:
	FAULTLINE_SCAN_BENCH_MB=$(SCAN_BENCH_MB) $(GO) test -count=1 -v -run '^TestScanVsGrep$$' ./cmd/faultline

## fuzz: run each fuzz target for FUZZTIME (seeds alone run in `make test`)
FUZZTIME ?= 30s
FUZZ_TARGETS := ./rules:FuzzLoad ./rules:FuzzBlankedTestingValues ./rules/logline:FuzzParseLine ./rules/logline:FuzzParseMatchesRegexReference \
	./dmesg-exporter/kmsg:FuzzParse ./dmesg-exporter/kmsg:FuzzReaderStream \
	./dmesg-exporter/cri:FuzzParseLine ./dmesg-exporter/cri:FuzzReassembler
fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $${t#*:} in $${t%%:*}"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}" || exit 1; \
	done

## bench-scale: the controller at 20,000 kwok nodes with heartbeats and a background of
## kernel lines sent through the collector to Loki and to the controller's intake, the
## node as structured metadata (as docs/scale.md recommends at that size); prints one
## SCALE line (make test runs the same test at 2,000 nodes)
bench-scale:
	test/tools/build.sh kwok
	FAULTLINE_TOOLS_PATH="$$(test/tools/build.sh path)" FAULTLINE_SCALE_NODES=20000 FAULTLINE_SCALE_BURST=1000 \
	  FAULTLINE_SCALE_SAMPLES=100 FAULTLINE_SCALE_CANDIDATE_RATE=2000 FAULTLINE_SCALE_NODE_IN=metadata \
	  $(GO) test -count=1 -timeout 60m -run '^TestScale$$' -v ./test/scale

rules-test: build
	$(BIN)/faultline rules test --no-default-packs rules/packs

clean:
	rm -rf $(BIN)

# --- Helm chart, rendered manifests, container images ----------------------------------
CHART      := helm/faultline
# helm to render and lint with; empty: the pinned helm of test/tools (built if missing).
HELM       ?=
DOCKER     ?= docker
IMAGE_REPO ?= ghcr.io/faultline-dev
IMAGE_TAG  ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' $(CHART)/Chart.yaml)
pinned_helm = helm="$(HELM)"; if [ -z "$$helm" ]; then test/tools/build.sh helm; \
	  for d in $$(test/tools/build.sh path | tr : ' '); do [ -x "$$d/helm" ] && helm="$$d/helm"; done; fi

.PHONY: generate generate-packs manifests image chart-lint

## generate: regenerate the NodeFault and ProbeRun CRDs and deepcopy code with the pinned controller-gen, and the compiled packs
generate: generate-packs
	test/tools/build.sh controller-gen
	@cg=; for d in $$(test/tools/build.sh path | tr : ' '); do [ -x "$$d/controller-gen" ] && cg="$$d/controller-gen"; done; \
	  set -e; tmp=$$(mktemp -d); \
	  "$$cg" object paths=./api/... crd:crdVersions=v1 output:crd:dir="$$tmp"; \
	  mv "$$tmp/faultline.io_nodefaults.yaml" api/v1alpha1/nodefaults.crd.yaml; \
	  mv "$$tmp/faultline.io_proberuns.yaml" api/v1alpha1/proberuns.crd.yaml; rm -rf "$$tmp"

## generate-packs: regenerate the compiled image of the built-in packs (rules/packs/zz_generated.image.go), after editing rules/packs/*.yaml
generate-packs:
	$(GO) generate ./rules/packs

## manifests: copy the default packs and the RBAC rules into the chart, then render it with default values into manifests/
manifests:
	rm -f $(CHART)/packs/*.yaml
	cp rules/packs/*.yaml $(CHART)/packs/
	cp controller/rbac/clusterrole.yaml $(CHART)/files/rbac/controller-clusterrole.yaml
	cp controller/rbac/role.yaml $(CHART)/files/rbac/controller-role.yaml
	cp controller/rbac/apiroles.yaml $(CHART)/files/rbac/controller-api-roles.yaml
	cp active-probes/agent/rbac/rbac.yaml $(CHART)/files/rbac/probe-agent.yaml
	cp active-probes/agent/rbac/nodecert.yaml $(CHART)/files/rbac/probe-agent-nodecert.yaml
	cp controller/rbac/signer.yaml $(CHART)/files/rbac/controller-signer.yaml
	cp controller/rbac/approver.yaml $(CHART)/files/rbac/controller-approver.yaml
	cp active-probes/pvc/role.yaml $(CHART)/files/rbac/pvc-probe-role.yaml
	@mkdir -p $(CHART)/crds manifests
	cp api/v1alpha1/nodefaults.crd.yaml $(CHART)/crds/nodefaults.crd.yaml
	cp api/v1alpha1/nodefaults.crd.yaml manifests/nodefaults.crd.yaml
	cp api/v1alpha1/proberuns.crd.yaml $(CHART)/crds/proberuns.crd.yaml
	cp api/v1alpha1/proberuns.crd.yaml manifests/proberuns.crd.yaml
	@$(pinned_helm); set -e; { \
	  echo '# Generated by `make manifests` (helm template faultline helm/faultline --namespace faultline,'; \
	  echo '# default values but probeAgent.tls.signer.existingSecret=faultline-probe-agent-signer,'; \
	  echo '# collector.tls.existingSecret=faultline-otel-collector-tls and'; \
	  echo '# controller.intake.tls.existingSecret=faultline-controller-intake-tls): do not edit.'; \
	  echo '# Apply with kubectl apply --server-side -f manifests/ after creating the namespace faultline,'; \
	  echo '# the probe agents'"'"' signer CA Secret and the collector'"'"'s and the intake'"'"'s TLS Secrets'; \
	  echo '# (see docs/install.md).'; \
	  "$$helm" template faultline $(CHART) --namespace faultline --set probeAgent.tls.signer.existingSecret=faultline-probe-agent-signer \
	    --set collector.tls.existingSecret=faultline-otel-collector-tls \
	    --set controller.intake.tls.existingSecret=faultline-controller-intake-tls; } > manifests/faultline.yaml.tmp
	mv manifests/faultline.yaml.tmp manifests/faultline.yaml

## image: build the faultline, faultline-probe-agent and faultline-otelcol images (tag: the chart's appVersion)
image:
	$(DOCKER) build -f Dockerfile -t $(IMAGE_REPO)/faultline:$(IMAGE_TAG) .
	$(DOCKER) build -f Dockerfile.probe-agent -t $(IMAGE_REPO)/faultline-probe-agent:$(IMAGE_TAG) .
	$(DOCKER) build -f Dockerfile.collector -t $(IMAGE_REPO)/faultline-otelcol:$(IMAGE_TAG) .

## chart-lint: helm lint --strict the chart with its defaults and with every test values file
chart-lint:
	@$(pinned_helm); set -e; \
	  "$$helm" lint --strict $(CHART); \
	  for f in test/chart/testdata/values-*.yaml; do "$$helm" lint --strict $(CHART) -f "$$f"; done
