# Drover's build, test and demo entry points. Go 1.26 is the only
# prerequisite; `make test` is what CI runs.
GO      ?= go
BIN     ?= bin
PKGS    := ./...
# The process-level tests, named before the others so that go test starts
# them at once and runs the unit packages beside them; in import-path
# order they would start after most of the rest.
LONG_TESTS := ./tests/systest
# The chaos suite runs alone, after the rest: its checkers give a SIGTERM
# 5 s to stop a probe and a worker seconds to learn of a kill, which a
# 2-core machine also running the process-level tests, every process
# under the race detector, did not always keep.
CHAOS_TESTS := ./jepsen/suite
UNIT_PKGS = $(filter-out $(LONG_TESTS:./%=%) $(CHAOS_TESTS:./%=%),$(shell $(GO) list -f '{{.ImportPath}}' $(PKGS) | sed 's|^github.com/drover-project/drover/||'))

.PHONY: all build test vet lint demo jepsen clean bench fuzz fuzz-smoke tzdata

all: build

build:
	$(GO) build -o $(BIN)/drover ./cmd/drover
	$(GO) build -o $(BIN)/wordcount ./examples/wordcount

vet:
	gofmt -l . | (! grep .) || (echo "gofmt would change the files above"; exit 1)
	$(GO) vet $(PKGS)

lint: vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

# gotestsum reads go test -json as the tests run and prints a line for
# each package as it ends, a failed test's output, and at the end the
# tests that skipped with the reason each gave (chromium, prometheus or
# root missing, say). go test's own output prints the packages in the
# order given, so with ./tests/systest first nothing showed for nine minutes.
# Its exit code is non-zero when a test fails or go test does.
GOTESTSUM := $(GO) run gotest.tools/gotestsum@v1.13.0 --format pkgname-and-test-fails --format-icons text --format-hide-empty-pkg

# Unit, process-level (tests/systest/) and failover tests, with the race
# detector. Tests that need root skip with a message when not run as root.
# The fuzz smoke runs first, so that the list of skipped tests ends the
# run; the chaos suite runs after the rest, alone, in the same report.
test: vet
	$(MAKE) fuzz-smoke
	$(GOTESTSUM) --raw-command -- sh -c '$(GO) test -json -race -count=1 -timeout 25m $(LONG_TESTS) $(addprefix ./,$(UNIT_PKGS)) && \
		$(GO) test -json -race -count=1 -timeout 15m $(CHAOS_TESTS)'

# Fuzz targets of the decoders of untrusted bytes (their seeds in
# */testdata/fuzz/ also run in every go test). go test -fuzz takes one
# target in one package at a time, hence one line each. fuzz-smoke runs
# each for FUZZTIME executions (5 to 15 s on two cores); fuzz for a
# million each (make fuzz FUZZTIME=10000000x). The budgets are counts,
# not durations: with a duration, Go 1.26's fuzz coordinator can fail a
# target with "context deadline exceeded" when its workers miss the
# deadline under load, having found nothing (go.dev/issue/75804).
# FUZZFLAGS=-parallel=1 keeps a run to one core.
FUZZTIME  ?= 10000x
FUZZFLAGS ?=
define run-fuzz
	$(GO) test -run='^$$' -fuzz='^FuzzCommand$$' -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./fsm
	$(GO) test -run='^$$' -fuzz='^FuzzRestore$$' -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./fsm
	$(GO) test -run='^$$' -fuzz='^FuzzHTTPBodies$$' -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./master
	$(GO) test -run='^$$' -fuzz='^FuzzCreate$$' -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./master/spark/restsubmit
	$(GO) test -run='^$$' -fuzz='^FuzzRunnerFiles$$' -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./worker/unitdir
	$(GO) test -run='^$$' -fuzz='^FuzzWorkerRecord$$' -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./worker
	$(GO) test -run='^$$' -fuzz='^FuzzCheckKeys$$' -fuzztime=$(FUZZTIME) $(FUZZFLAGS) ./internal/strictjson
endef

# The zone rules schedules are read in: the IANA database of the Go
# toolchain, built into the binary (master/schedule/zones.go).
tzdata:
	cp "$$($(GO) env GOROOT)/lib/time/zoneinfo.zip" master/schedule/zoneinfo.zip

fuzz-smoke:
	$(run-fuzz)

fuzz: FUZZTIME = 1000000x
fuzz:
	$(run-fuzz)

demo: build
	BIN=$(BIN) ./examples/demo.sh

# The chaos suite (as root): one run with the arguments in JEPSEN_ARGS;
# JEPSEN_ARGS='--schedules 20' runs 20 randomized schedules.
JEPSEN_ARGS ?= --nemesis kill,partition,pause --time 60s
jepsen:
	$(GO) run ./jepsen $(JEPSEN_ARGS)

# Benchmarks against the targets: writes docs/benchmarks.md and docs/benchmarks.json.
bench:
	$(GO) run ./tests/bench

clean:
	rm -rf $(BIN)
