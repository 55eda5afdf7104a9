# mgpu-learn — build, run, test.
#   make run       build and open the course (embedded content) in the terminal UI
#   make test      everything CI runs on a machine without GPUs (installs what it needs into .tools/)
#   make unit      Go tests only (fast)
#   make gpu-test  the GPU acceptance suite (on a GPU machine; see scripts/gpu-acceptance.sh)
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/mgpu-learn/mgpu-learn/internal/cli.Version=$(VERSION)
BIN := bin/mgpu-learn
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build run test unit lint deps course-checks tui-smoke gpu-test clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/mgpu-learn

run: build
	./$(BIN) start

deps:
	scripts/install-ci-deps.sh

lint:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt would change:"; echo "$$bad"; exit 1; fi
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; $(GO) mod tidy -diff; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

unit:
	$(GO) test -race -count=1 ./...

course-checks: build
	scripts/course-checks.sh

tui-smoke: build
	scripts/tui-smoke.sh

test: deps lint unit tui-smoke course-checks

gpu-test:
	scripts/gpu-acceptance.sh

clean:
	rm -rf bin
