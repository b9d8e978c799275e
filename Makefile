# mirrord: see README.md. `make test` is what CI runs (.ci/run).
GO        ?= go
FUZZTIME  ?= 10s
BENCHTIME ?= 1s
BIN       := bin/mirrord

# Every fuzz target as package:Target, found in *_test.go files.
FUZZ_TARGETS := $(shell grep -l '^func Fuzz' $$(find . -name '*_test.go' -not -path './.cache/*') 2>/dev/null | \
	xargs -r grep -H -o '^func Fuzz[A-Za-z0-9_]*' | sed -E 's|^\./(.*)/[^/]*:func (Fuzz.*)$$|\1:\2|')

.PHONY: all build tools test vet unit fuzz fuzz-short bench demo clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/mirrord

# Test tools the e2e suite runs: kcat, cached in .cache/ (scripts/install-kcat.sh).
tools:
	bash scripts/install-kcat.sh

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

# A short run of every fuzz target (seed corpus plus FUZZTIME of new inputs).
fuzz-short:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) ./$$pkg; \
	done

test: tools vet unit fuzz-short

# Longer fuzzing: make fuzz FUZZTIME=5m
fuzz: fuzz-short

bench:
	$(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) -benchmem ./...

demo: build
	./$(BIN) demo

clean:
	rm -rf bin .cache
