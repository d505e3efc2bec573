# Drover's build, test and demo entry points. Go 1.26 is the only
# prerequisite; `make test` is what CI runs.
GO      ?= go
BIN     ?= bin
PKGS    := ./...

.PHONY: all build test vet lint demo jepsen clean bench

all: build

build:
	$(GO) build -o $(BIN)/drover ./cmd/drover
	$(GO) build -o $(BIN)/wordcount ./examples/wordcount

vet:
	gofmt -l . | (! grep .) || (echo "gofmt would change the files above"; exit 1)
	$(GO) vet $(PKGS)

lint: vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

# Unit, process-level and failover tests, with the race detector. Tests
# that need root skip with a message when not run as root.
test: vet
	$(GO) test -race -count=1 -timeout 25m $(PKGS)

demo: build
	BIN=$(BIN) ./examples/demo.sh

# The chaos suite (as root): one run with the arguments in JEPSEN_ARGS.
JEPSEN_ARGS ?= --nemesis kill,partition,pause --time 60s
jepsen:
	$(GO) run ./jepsen $(JEPSEN_ARGS)

# Benchmarks against the targets: writes docs/benchmarks.md and docs/benchmarks.json.
bench:
	$(GO) run ./bench

clean:
	rm -rf $(BIN)
