# oml — run `make help` for the targets.
SHELL := /usr/bin/env bash
GO    ?= go
BIN   := bin/oml
PKGS  := ./...
# Tests that need PostgreSQL start their own throwaway cluster; S3 tests start
# a real S3-compatible server (versitygw) built once into ~/.cache/oml.
TEST_TIMEOUT ?= 30m

.PHONY: help
help: ## list targets
	@grep -hE '^[a-zA-Z_/-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: deps
deps: deps/demo ## install what the build and tests need (Go modules, PostgreSQL, versitygw, promtool)
	scripts/ensure-versitygw.sh >/dev/null
	scripts/ensure-promtool.sh

# The demo runs on a file:// lake and a private PostgreSQL: it needs no S3
# server and no promtool, so it does not wait minutes for versitygw to build.
.PHONY: deps/demo
deps/demo: ## install what the build and the demo need (Go modules, PostgreSQL)
	$(GO) mod download
	scripts/ensure-postgres.sh

.PHONY: build
# The commit and the build time go into `oml version` (Go itself records no
# build time, and the commit only when it can run git on the checkout).
LDFLAGS := -X github.com/omlhq/oml/internal/buildinfo.BuildTime=$(shell date -u +%Y-%m-%dT%H:%M:%SZ) \
           -X github.com/omlhq/oml/internal/buildinfo.Commit=$(shell git rev-parse HEAD 2>/dev/null)

build: ## build bin/oml (with its commit and build time for oml version)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/oml

.PHONY: docs
docs: ## regenerate the command reference docs/reference/ from the command tree
	$(GO) run ./internal/docstest/gendocs

.PHONY: lint
lint: ## gofmt must leave no diff, go vet must pass
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

.PHONY: test
test: deps lint ## run the whole test suite with the race detector (starts its own servers)
	OML_VERSITYGW="$$(scripts/ensure-versitygw.sh)" $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

.PHONY: test/short
test/short: ## quick unit tests only (no race detector)
	$(GO) test -short -count=1 $(PKGS)

.PHONY: bench
bench: deps ## run benchmarks (BENCHTIME=1x for a smoke run)
	OML_VERSITYGW="$$(scripts/ensure-versitygw.sh)" $(GO) test -run '^$$' -bench . -benchmem -benchtime $${BENCHTIME:-1s} $(PKGS)

.PHONY: demo
demo: deps/demo build ## run the main job end to end on local defaults (no S3 server needed), then clean up
	scripts/demo.sh

.PHONY: clean
clean: ## remove build output and the local dev cluster
	-$(BIN) dev down --purge 2>/dev/null
	rm -rf bin .oml
