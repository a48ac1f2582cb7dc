# ilb: make targets. `make` alone prints this list.
GO      ?= go
PKGS    ?= ./...
BENCH   ?= .
FUZZTIME ?= 10s

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: dev
dev: ## run the whole local fleet (go run ./services/ilb dev)
	$(GO) run ./services/ilb dev

.PHONY: test
test: ## run every test with the race detector, then the backtest acceptance (what CI runs)
	$(GO) test -race -timeout 25m $(PKGS)
	@# The Mooncake acceptance replays take minutes under -race and skip
	@# themselves there; run them once without it so CI checks the targets.
	$(GO) test -count=1 -run 'TestAcceptance' ./services/backtest

.PHONY: lint
lint: ## gofmt, go vet and the layout tests
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) test -run 'TestDependencyDirection|TestEveryPackageHasDoc' .

.PHONY: bench
bench: ## run the benchmarks (BENCH=regexp to select)
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(PKGS)

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME
	@for p in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$p | grep '^Fuzz'); do \
	    echo "== $$p $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
	  done; done

.PHONY: compose-config
compose-config: ## validate docker-compose.yml as `docker compose config` does (compose-go; no Docker needed)
	$(GO) test -count=1 -run 'TestComposeSpec' -v ./integration/

.PHONY: up
up: ## start the docker-compose fleet (needs a Docker engine)
	docker compose up --build

.PHONY: build
build: ## build the ilb binary into ./bin/ilb
	$(GO) build -o bin/ilb ./services/ilb
