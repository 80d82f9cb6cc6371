# walctl — build, test, generate, bench.
# `make test` is the one command that runs the whole test suite on a fresh
# machine: it installs what the tests need (Go modules, the official LanceDB
# reader from npm, goreleaser) and then runs unit, integration, testscript,
# staleness and release checks.

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

.PHONY: all build test unit lint vet fmt-check deps oracle tools release-check generate bench clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/walctl ./cmd/walctl

## test: everything — lint, unit, integration (real etcd, real WAL processes,
## the official LanceDB reader), testscripts, staleness and release checks.
test: deps lint unit release-check

unit: oracle
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

lint: vet fmt-check

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

deps:
	$(GO) mod download

## oracle: the official LanceDB Node package, pinned by package-lock.json.
oracle: $(ORACLE)/node_modules/.installed

$(ORACLE)/node_modules/.installed: $(ORACLE)/package.json $(ORACLE)/package-lock.json
	npm ci --prefix $(ORACLE) --no-audit --no-fund
	touch $@

tools: $(BIN)/goreleaser

$(BIN)/goreleaser:
	GOBIN=$(BIN) $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

release-check: $(BIN)/goreleaser
	$(BIN)/goreleaser check

## generate: refresh completions/ and man/ from the command tree.
generate:
	$(GO) test ./internal/commands -run TestGeneratedFilesUpToDate -update -count=1

## bench: Go benchmarks of the WAL and the Lance writer.
bench: oracle
	$(GO) test -run '^$$' -bench . -benchtime 3x ./internal/core/...

clean:
	rm -rf $(BIN) dist
