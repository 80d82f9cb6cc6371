# walctl — build, test, generate, bench.
# `make test` is the one command that runs the whole test suite on a fresh
# machine: it installs what the tests need (Go modules, the official LanceDB
# reader from npm, goreleaser, a kube-apiserver built from Go modules) and then
# runs unit, integration, testscript, staleness and release checks.

GO        ?= go
BIN       := $(CURDIR)/bin
PKG       := github.com/walctl/walctl
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE      ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS   := -s -w -X $(PKG)/internal/buildinfo.Version=$(VERSION) -X $(PKG)/internal/buildinfo.Commit=$(COMMIT) -X $(PKG)/internal/buildinfo.Date=$(DATE)
GORELEASER_VERSION := v2.15.1
ORACLE    := tools/lance-oracle
TEST_TIMEOUT ?= 60m

.PHONY: all build test unit lint vet fmt-check deps oracle kube-apiserver tools release-check image bundle catchup-rss generate qualify qualify-replicated powerloss chaos bench clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/walctl ./cmd/walctl

## test: everything — lint, unit, integration (real etcd, real WAL processes,
## the official LanceDB reader), testscripts, staleness and release checks.
test: deps lint unit release-check

unit: oracle kube-apiserver etcd versitygw bundle
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

lint: vet fmt-check

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

deps:
	$(GO) mod download

## kube-apiserver: a real Kubernetes API server for the Job-runner tests
## (internal/core/kube), built from Go modules by the tools module
## hack/kube-apiserver so that k8s.io/kubernetes stays out of walctl's go.mod.
## Cold: about 5 minutes and 3 GB of memory on 2 cores; warm: seconds.
KUBE_APISERVER := $(BIN)/kube-apiserver

kube-apiserver: $(KUBE_APISERVER)

$(KUBE_APISERVER): hack/kube-apiserver/go.mod hack/kube-apiserver/go.sum hack/kube-apiserver/tools.go
	cd hack/kube-apiserver && $(GO) build -o $(KUBE_APISERVER) k8s.io/kubernetes/cmd/kube-apiserver

## etcd: a real etcd server (the version of walctl's go.mod) as a process, for
## the fault harness internal/chaos, which kills, pauses and restarts it.
## Built from Go modules by the tools module hack/etcd (`go install` of the
## etcd server is refused because of its replace directives).
.PHONY: etcd chaos
ETCD := $(BIN)/etcd

etcd: $(ETCD)

$(ETCD): hack/etcd/go.mod hack/etcd/go.sum hack/etcd/main.go
	cd hack/etcd && $(GO) build -o $(ETCD) .

## versitygw: a real S3-compatible server (versitygw v1.8.0, serving a
## directory) for the tests of tables on object storage
## (internal/testutil/s3server starts it on loopback). Built from Go modules
## by the tools module hack/versitygw, so that it stays out of walctl's
## go.mod. Cold: about 2-5 minutes on 2 cores; warm: seconds.
.PHONY: versitygw
VERSITYGW := $(BIN)/versitygw

versitygw: $(VERSITYGW)

$(VERSITYGW): hack/versitygw/go.mod hack/versitygw/go.sum hack/versitygw/tools.go
	cd hack/versitygw && $(GO) build -o $(VERSITYGW) github.com/versity/versitygw/cmd/versitygw

## chaos: randomized, seeded fault schedules against real processes (etcd,
## wal serve, workers, master with catch-up executors, one-shot publish,
## table compact and table clean): SIGKILL, SIGSTOP past the claim TTL,
## etcd and WAL restarts, injected I/O errors, a worker's failed fsync
## (the table stops for the fleet until resumed). Strict verdicts: only an
## append of unknown outcome may be in a table unACKed, every Lance version
## is audited and is the one its committer logged, a planned fault that
## never fired or a crash fails the run.
## One line per run; a failed run prints its seed and schedule.
##   make chaos RUNS=100      a hundred runs (the default)
##   make chaos SEED=1234     replay one run
##   make chaos EXCLUDE=k,…   leave fault kinds out
## `make test` runs a short schedule (3 runs) of the same test.
CHAOS_ENV = $(if $(SEED),WALCTL_CHAOS_SEED=$(SEED)) \
	$(if $(RUNS),WALCTL_CHAOS_RUNS=$(RUNS),$(if $(SEED),,WALCTL_CHAOS_RUNS=100)) \
	$(if $(EXCLUDE),WALCTL_CHAOS_EXCLUDE=$(EXCLUDE))

chaos: oracle etcd
	$(CHAOS_ENV) $(GO) test -count=1 -v -timeout 6h -run TestChaos ./internal/chaos

## oracle: the official LanceDB Node package, pinned by package-lock.json.
oracle: $(ORACLE)/node_modules/.installed

$(ORACLE)/node_modules/.installed: $(ORACLE)/package.json $(ORACLE)/package-lock.json
	npm ci --prefix $(ORACLE) --no-audit --no-fund
	touch $@

tools: $(BIN)/goreleaser $(BIN)/kustomize $(BIN)/walctl-image

$(BIN)/goreleaser:
	GOBIN=$(BIN) $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

## release-check: the release configuration, the container image and the
## deployable bundle pinned to that image's digest.
release-check: $(BIN)/goreleaser bundle
	$(BIN)/goreleaser check

## kustomize and walctl-image: built once into bin/ by the tools modules
## hack/kustomize (kustomize v5.8.2, api v0.21.2) and hack/image
## (go-containerregistry v0.22.1), which keep both out of walctl's go.mod.
$(BIN)/kustomize: hack/kustomize/go.mod hack/kustomize/go.sum hack/kustomize/tools.go
	cd hack/kustomize && $(GO) build -o $(BIN)/kustomize sigs.k8s.io/kustomize/kustomize/v5

$(BIN)/walctl-image: hack/image/go.mod hack/image/go.sum hack/image/main.go
	cd hack/image && $(GO) build -o $(BIN)/walctl-image .

## image: the walctl container image as an OCI layout in dist/image/oci,
## offline (no Docker daemon, no registry, no base image): a static
## linux/$(IMAGE_ARCH) walctl on an empty base, user 65532. Every timestamp
## is the commit time, so one commit gives one digest (dist/image/digest);
## the image is built twice and the two digests must be equal.
IMAGE_REPO  ?= ghcr.io/walctl/walctl
IMAGE_ARCH  ?= amd64
IMAGE_EPOCH := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_LDFLAGS := -s -w -X $(PKG)/internal/buildinfo.Version=$(VERSION) -X $(PKG)/internal/buildinfo.Commit=$(COMMIT) -X $(PKG)/internal/buildinfo.Date=$(shell date -u -d @$(IMAGE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
IMAGE_FLAGS = -repo $(IMAGE_REPO) -arch $(IMAGE_ARCH) -created $(IMAGE_EPOCH) -version $(VERSION)

image: $(BIN)/walctl-image
	rm -rf dist/image dist/bundle && mkdir -p dist/image dist/bundle
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags '$(IMAGE_LDFLAGS)' -o dist/image/walctl ./cmd/walctl
	$(BIN)/walctl-image $(IMAGE_FLAGS) -binary dist/image/walctl -layout dist/image/oci -digest-file dist/image/digest \
		-template deploy/catchup-job-template.yaml -pinned-template dist/bundle/catchup-job-template.yaml
	$(BIN)/walctl-image $(IMAGE_FLAGS) -binary dist/image/walctl -layout dist/image/oci-again -digest-file dist/image/digest-again >/dev/null
	cmp dist/image/digest dist/image/digest-again || { echo "image is not reproducible"; exit 1; }
	rm -rf dist/image/oci-again dist/image/digest-again

## bundle: dist/walctl-bundle.yaml, deploy/ rendered by kustomize through
## the overlay dist/bundle, which pins every image (the Job template's in
## its ConfigMap too) to the digest `make image` built.
bundle: image $(BIN)/kustomize
	cd dist/bundle && $(BIN)/kustomize create --resources ../../deploy \
		&& $(BIN)/kustomize edit set image $(IMAGE_REPO)@$$(cat ../image/digest) \
		&& $(BIN)/kustomize edit add configmap walctl-catchup-job-template --behavior=replace --from-file=catchup-job-template.yaml
	$(BIN)/kustomize build dist/bundle > dist/walctl-bundle.yaml
	@d=$$(cat dist/image/digest); n=$$(grep -c "$(IMAGE_REPO)@$$d" dist/walctl-bundle.yaml); \
	if grep -q 'sha256:0000000000000000' dist/walctl-bundle.yaml || [ "$$n" -lt 3 ]; then \
		echo "dist/walctl-bundle.yaml is not pinned to $$d"; exit 1; fi; \
	echo "dist/walctl-bundle.yaml: $$n images pinned to $(IMAGE_REPO)@$$d"

## generate: refresh completions/ and man/ from the command tree.
generate:
	$(GO) test ./internal/commands -run TestGeneratedFilesUpToDate -update -count=1

## qualify: the recovery qualification of publication on a 192 MiB backlog,
## both preparation modes: real WAL and worker processes SIGKILLed
## mid-publication, reopened, one publication, checked by the official
## LanceDB reader, row counts, the read-only reader and walctl verify (with
## negative controls). The test suite runs the same test on 64 MiB.
QUALIFY_BYTES ?= 192MiB
qualify: oracle
	WALCTL_QUALIFY_BYTES=$(QUALIFY_BYTES) $(GO) test -count=1 -v -timeout 60m -run TestRecoveryAfterSIGKILLMidPublication ./internal/qualify

## qualify-replicated: nine `wal serve` replicas (three groups of three,
## mutual TLS) all SIGKILLed with 192 MiB ACKed and unpublished, restarted,
## published; checked by the official LanceDB reader and walctl verify. The
## test suite runs the same test on 8 MiB.
REPLICA_BYTES ?= 192MiB
qualify-replicated: oracle
	WALCTL_REPLICA_BYTES=$(REPLICA_BYTES) $(GO) test -count=1 -v -timeout 60m -run 'TestNineReplicas' ./internal/walreplica

## powerloss: power cuts on a file system that forgets whatever was never
## made durable, as ext4 and xfs may (internal/testutil/powerfs, a FUSE
## loopback in the spirit of LazyFS: torn cuts keep an in-order prefix of
## name changes, torn pages, sectors and truncations; fsync failures with
## Linux's semantics). Real `wal serve` and `worker run` with their
## directories on it; cuts after scripted sequences, simple (a random
## moment, right after an ACK, a publication failpoint) or compound (kill →
## restart → publish → cut; a cut during recovery; an fsync failure, then
## another process, then a cut; compact or clean paused mid-way). After
## each cut every ACKed position is read back and every Lance version
## audited; at the end of each run the official LanceDB reader and `walctl
## verify` must find each ACKed id once. Needs /dev/fuse and root. `make
## test` runs 3 cuts; POWERLOSS_SEED replays a failed run (the failure
## prints its seed); COMPOUND is the share of compound sequences (percent).
CUTS ?= 300
COMPOUND ?= 90
POWERLOSS_SEED ?=
powerloss: oracle
	WALCTL_POWERLOSS_CUTS=$(CUTS) WALCTL_POWERLOSS_COMPOUND=$(COMPOUND) WALCTL_POWERLOSS_SEED=$(POWERLOSS_SEED) $(GO) test -count=1 -v -timeout 300m -run '^TestPowerLoss$$' ./internal/powerloss

## make chaos runs the power cuts too (CUTS of them).
chaos: powerloss

## catchup-rss: a real `walctl catchup run` process on a 2 GiB backlog
## with the default budgets (merge buffer 1 GiB, cache 128 MiB): its peak
## RSS must stay within merge buffer + cache + 64 MiB; the figures and the
## cache's hit rate are printed. The test suite runs 256 MiB with budgets of
## 128 + 32 MiB.
RSS_BYTES ?= 2GiB
catchup-rss:
	WALCTL_RSS_BYTES=$(RSS_BYTES) WALCTL_RSS_MERGE_BYTES=$(or $(RSS_MERGE),1GiB) WALCTL_RSS_CACHE_BYTES=$(or $(RSS_CACHE),128MiB) \
		$(GO) test -count=1 -v -timeout 90m -run TestCatchupRunPeakRSSWithinBudgets ./internal/catchuprss

## bench: Go benchmarks of the WAL and the Lance writer.
bench: oracle kube-apiserver
	$(GO) test -run '^$$' -bench . -benchtime 3x ./internal/core/...

clean:
	rm -rf $(BIN) dist
