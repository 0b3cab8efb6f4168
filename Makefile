# omnigraph-worker: every target works on a fresh clone after `bash .ci/run` has installed deps.
GO        ?= go
NODE_DIR  := integration/lancecompat
GOFLAGS   ?=
export GOFLAGS

SHELL     := /bin/bash
.PHONY: run test unit race lance-compat bench bench-framing crash fuzz vet build npm clean soak

# -buildvcs=auto: the binary knows its commit (`worker version`, omnigraph_build_info) even where
# GOFLAGS turns VCS stamping off.
build:
	$(GO) build -buildvcs=auto -o bin/worker ./cmd/worker

# The worker on an embedded default: embedded NATS JetStream (data in .data/graph.nats), a local
# graph in .data/graph initialised from the bundled example schema, graph name "demo".
run: build
	./bin/worker run --root .data/graph --graph demo --schema graph/pg/testdata/example.pg

# The README's test command: static checks, unit tests under the race detector, then the
# interop suite against the official Lance engine.
test: vet race lance-compat

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './$(NODE_DIR)/node_modules/*')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff > .tidy.diff || { echo "go.mod/go.sum are not tidy (go mod tidy):"; cat .tidy.diff; rm -f .tidy.diff; exit 1; }; rm -f .tidy.diff
	@# Comments, errors and docs cite only what the repository holds (docs/), never notes beside it.
	@if git grep -nE '\.\./shared|(surface|storage) §|ARCHITECTURE\.md' -- '*.go' '*.md' '*.mjs' '*.sh' 2>/dev/null; then \
	  echo "the lines above cite files outside the repository: move the facts into docs/"; exit 1; fi
	$(GO) vet ./...

race:
	$(GO) test -race -count=1 -timeout 15m ./...

unit:
	$(GO) test -count=1 ./...

$(NODE_DIR)/node_modules: $(NODE_DIR)/package-lock.json
	cd $(NODE_DIR) && npm ci --no-audit --no-fund
	@touch $@

npm: $(NODE_DIR)/node_modules

lance-compat: npm
	$(GO) run ./integration/lancecompat/driver -script $(NODE_DIR)/compat.mjs

# Kills real child processes at every step of the write and recovery protocols; the last line
# is the tally. Also part of `make test` (it is a package under ./...).
crash:
	@set -o pipefail; $(GO) test -count=1 -v -run 'TestCrashMatrix|TestMergeCrashMatrix|TestOptimizeCrashMatrix|TestIndexBuildCrashMatrix|TestIndexFoldCrashMatrix|TestCleanupCrash|TestPipelineCrashMatrix|TestSchemaCrashMatrix|TestZombieMatrix' ./integration/crash/ > .crash.log 2>&1; status=$$?; \
	  grep -E '^\s*(--- FAIL|FAIL|panic|.*crash_test.go:)' .crash.log; grep -E '^ok ' .crash.log; \
	  grep '^crash-matrix' .crash.log || echo 'crash-matrix: did not run'; rm -f .crash.log; exit $$status

# The latency, lance, index, e2e and graph lines run BENCH_ROUNDS times (each round a process of
# its own, Go and the official engine paired within it), then their medians and the goals
# (`bench: goal …`, last `bench: goals met=…`); framing, jetstream, merge, history, pipeline-full
# and the aged graph run once.
BENCH_ROUNDS ?= 3
bench: npm
	$(GO) run ./integration/bench -script $(NODE_DIR)/compat.mjs -rounds $(BENCH_ROUNDS)

# Only the framing lines of `make bench` (MB/s per core, alone and with the Arrow build): no Node.
bench-framing:
	$(GO) run ./integration/bench -only framing

# `worker run` under a steady stream (SOAK_MINUTES, default 10) with its memory, descriptors
# and goroutines printed each minute and their slopes at the end; not part of `make test`.
SOAK_MINUTES ?= 10
SOAK_WARMUP ?= 2
SOAK_PROFILES ?=
soak:
	$(GO) run ./integration/soak -minutes $(SOAK_MINUTES) -warmup $(SOAK_WARMUP) -profiles "$(SOAK_PROFILES)"

# Short fuzz runs of every parser; corpora live in testdata/fuzz of each package.
FUZZTIME ?= 20s
FUZZ = $(GO) test -run '^$$' -fuzzminimizetime 5s -fuzztime $(FUZZTIME)
fuzz:
	$(FUZZ) ./lance/file -fuzz '^FuzzOpen$$'
	$(FUZZ) ./lance/file -fuzz '^FuzzReadPage$$'
	$(FUZZ) ./lance/file -fuzz '^FuzzRoundTrip$$'
	$(FUZZ) ./lance/file -fuzz '^FuzzOpen21$$'
	$(FUZZ) ./lance/file -fuzz '^FuzzReadPage21$$'
	$(FUZZ) ./lance -fuzz '^FuzzManifest$$'
	$(FUZZ) ./lance -fuzz '^FuzzIndexSection$$'
	$(FUZZ) ./lance -fuzz '^FuzzReadFST$$'
	$(FUZZ) ./lance -fuzz '^FuzzBTreeFiles$$'
	$(FUZZ) ./lance -fuzz '^FuzzInvertedTokens$$'
	$(FUZZ) ./lance -fuzz '^FuzzInvertedPartition$$'
	$(FUZZ) ./lance -fuzz '^FuzzIndexFile$$'
	$(FUZZ) ./lance -fuzz '^FuzzIndexFold$$'
	$(FUZZ) ./lance -fuzz '^FuzzTransaction$$'
	$(FUZZ) ./lance -fuzz '^FuzzDeletionFile$$'
	$(FUZZ) ./lance -fuzz '^FuzzRowIDSequence$$'
	$(FUZZ) ./lance -fuzz '^FuzzVersionSequence$$'
	$(FUZZ) ./framing -fuzz '^FuzzParse$$'
	$(FUZZ) ./framing -fuzz '^FuzzFastPath$$'
	$(FUZZ) ./graph/pg -fuzz '^FuzzParse$$'
	$(FUZZ) ./graph/pg/migrate -fuzz '^FuzzParsePlan$$'
	$(FUZZ) ./recovery -fuzz '^FuzzParse$$'
	$(FUZZ) ./engine/rows -fuzz '^FuzzBuild$$'
	$(FUZZ) ./engine/rows -fuzz '^FuzzParseNumber$$'
	$(FUZZ) ./ingest -fuzz '^FuzzRequests$$'
	$(FUZZ) ./config -fuzz '^FuzzLoad$$'

clean:
	rm -rf bin .data
