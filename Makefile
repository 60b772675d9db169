# delayq: build, test and demo. GNU make.
#
#   make deps   install redis-server and nutcracker (Debian/Ubuntu) when missing
#   make test-deps  also chromium, which the dashboard's tests drive headless
#   make build  build bin/delayq
#   make test   go vet, staticcheck's default checks, every test with -race
#               (real servers), then check that every Redis command the tests
#               sent is portable (docs/portability.md)
#   make demo   run scripts/demo.sh: two backends behind Twemproxy, five messages
#   make bench  run scripts/bench.sh: enqueue, burst, spread, due now and a
#               rate-limited backlog, direct and proxied
#               (RUNS=5: five runs of each, then a line of medians)
#   make bench-idle  run scripts/idle.sh: idle workers' Redis commands beside
#               idle asynq servers' (1, 4 and 8 of each; several minutes)
#   make bench-cluster  run scripts/bench-cluster.sh: enqueue and burst
#               through a Redis Cluster beside Twemproxy, masters' shares
#   make clean  remove build and test outputs

SHELL := /bin/bash
GO    ?= go
BIN   := bin/delayq
AUDIT := $(CURDIR)/.audit/commands.log
FIGURES := $(CURDIR)/.audit/figures.txt
# apt-get needs root: use sudo only when we are not root already.
SUDO  := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps test-deps build test demo bench bench-idle bench-cluster bench-against bench-million clean

all: build

# Debian's nutcracker lives in /usr/sbin, often not on a user's PATH. Note
# that installing redis-server also starts a service on port 6379; the tests
# and the demo do not use it (they start their own servers on free ports).
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v nutcracker >/dev/null 2>&1 || [ -x /usr/sbin/nutcracker ] || missing="$$missing nutcracker"; \
	if [ -n "$$missing" ]; then \
		echo "deps: installing$$missing"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	else \
		echo "deps: redis-server and nutcracker are installed"; \
	fi

test-deps: deps
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		echo "test-deps: chromium is installed"; \
	else \
		echo "test-deps: installing chromium"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi

# -buildvcs=auto stamps the binary with its VCS revision (delayq version)
# in a checkout, whatever GOFLAGS says; outside one it stamps nothing.
build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/delayq

# Packages run one at a time (-p 1): the end-to-end and fault tests measure
# lateness and lease handover, which other packages' tests running beside
# them on 2 cores would distort. The root package runs first, its
# parallel tests (the crash matrices and others that measure no lateness)
# 4 at a time: they mostly wait for deliveries due a moment later. The
# end-to-end package runs last, its parallel tests 4 at a time: they run
# delayq as processes and mostly wait, but 8 at a time (the fleets of
# subs and producers, Codis and Redis Cluster beside each other) kept
# both cores busy for minutes, and scenarios that count starts a second
# or windows of seconds fell behind.
# The end-to-end tests in test/ run $(BIN) (DELAYQ_BIN) instead of building
# their own. Every process of the run appends the command shapes it sends to
# $(AUDIT), which auditcheck then verifies against the portable set
# (docs/portability.md).
# staticcheck's default checks (among them U1000, code nothing uses; the
# module proxy serves it).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

# The Codis scenarios (test/codis_test.go) run Codis 3.2 from
# $$DELAYQ_CODIS_BIN, or from what ../shared/codis/build.sh builds (about
# 1.5 minutes the first time, then instant); without either they skip.
test: test-deps build
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	rm -f $(AUDIT) $(FIGURES)
	mkdir -p $(dir $(AUDIT))
	codis="$${DELAYQ_CODIS_BIN:-}"; \
	if [ -z "$$codis" ] && [ -x ../shared/codis/build.sh ]; then \
		codis=$$(../shared/codis/build.sh) || exit 1; \
	fi; \
	if [ -n "$$codis" ]; then \
		echo "Codis 3.2: $$codis"; \
	else \
		echo "Codis 3.2 not found: the Codis scenarios skip (set DELAYQ_CODIS_BIN to the folder of codis-server, codis-proxy, codis-dashboard and codis-admin)"; \
	fi; \
	export DELAYQ_CODIS_BIN=$$codis DELAYQ_COMMAND_AUDIT=$(AUDIT) DELAYQ_BIN=$(CURDIR)/$(BIN) DELAYQ_FIGURES=$(FIGURES); \
	$(GO) test -race -count=1 -parallel 4 -timeout 20m . && \
	$(GO) test -race -count=1 -p 1 -timeout 20m $$($(GO) list ./... | grep -v -x -e "$$($(GO) list .)" -e '.*/test') && \
	$(GO) test -race -count=1 -parallel 4 -timeout 20m ./test
	$(GO) run ./internal/portable/auditcheck $(AUDIT)
	@echo "figures measured by the tests (2 cores here; see docs/testing.md):"; cat $(FIGURES)

demo: deps build
	DELAYQ=$(CURDIR)/$(BIN) ./scripts/demo.sh

# The workloads of docs/benchmarks.md, directly and through Twemproxy.
RUNS ?= 1
bench: deps build
	DELAYQ=$(CURDIR)/$(BIN) ./scripts/bench.sh --runs $(RUNS)

bench-idle: deps build
	DELAYQ=$(CURDIR)/$(BIN) ./scripts/idle.sh

bench-cluster: deps build
	DELAYQ=$(CURDIR)/$(BIN) ./scripts/bench-cluster.sh

# The burst drain against an older commit's (BASE, default a1eb2c5), in
# one session: docs/benchmarks.md, "Against the engine before flow control".
bench-against: deps build
	DELAYQ=$(CURDIR)/$(BIN) ./scripts/against.sh

# A million messages due at one instant, under each consumer setting:
# docs/benchmarks.md, "A million due at one instant".
bench-million: deps build
	DELAYQ=$(CURDIR)/$(BIN) ./scripts/million.sh

clean:
	rm -rf bin .audit
