# pgoutbox — every target starts the local throw-away cluster first unless DATABASE_URL is set.
SHELL := /bin/bash
export GOFLAGS ?= -mod=mod

# Base URL: the cluster's maintenance database (tests create their own databases from it).
DATABASE_URL ?= $(shell scripts/pg.sh url postgres)
export DATABASE_URL
# The application database that `make migrate`, outboxctl and the demo use.
PGOUTBOX_URL ?= $(shell DATABASE_URL= scripts/pg.sh url pgoutbox)
ifneq ($(origin DATABASE_URL),file)
PGOUTBOX_URL := $(DATABASE_URL)
endif
export PGOUTBOX_URL

GO_TEST_FLAGS ?= -count=1 -timeout 40m

.PHONY: all build db-up db-down db-destroy db-url migrate test test-go check-sql-api fuzz bench demo soak schema clean

all: build

build:
	go build ./...

# With DATABASE_URL from the environment the cluster is the caller's: nothing is started.
ifeq ($(origin DATABASE_URL),file)
PGCTL := env -u DATABASE_URL scripts/pg.sh
else
PGCTL := scripts/pg.sh
endif

db-up:
	@$(PGCTL) up

db-down:
	@$(PGCTL) down

db-destroy:
	@$(PGCTL) destroy

db-url:
	@echo $(DATABASE_URL)

## migrate: apply sql/ with the tern CLI pinned in go.mod (re-running is a no-op)
migrate: db-up
	go tool tern migrate -m sql --conn-string "$(PGOUTBOX_URL)"

## test: everything, against real PostgreSQL
test: db-up build
	go vet ./...
	go vet -tags bench ./bench/
	go test $(GO_TEST_FLAGS) ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=10s
	$(MAKE) --no-print-directory check-sql-api

## fuzz: bounded cross-implementation fuzzing of the two canonicalizers (D-2, T-6)
FUZZTIME ?= 30s
fuzz: db-up
	go test ./tests -run '^$$' -fuzz FuzzCanonicalAgreement -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	go test ./internal/canon -run '^$$' -fuzz FuzzCanonicalizeIdempotent -fuzztime $(FUZZTIME)

check-sql-api: db-up
	@go tool tern migrate -m sql --conn-string "$(PGOUTBOX_URL)" > /dev/null
	@if [ -x ../shared/tools/check-sql-api ]; then ../shared/tools/check-sql-api "$(PGOUTBOX_URL)"; \
	else echo "check-sql-api: ../shared/tools/check-sql-api not present, skipped"; fi

## bench: benchmarks against the local cluster (fsync on); never part of make test
BENCHTIME ?= 2000x
bench: db-up
	go test -tags bench -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 60m ./bench/ | tee bench.out

## demo: the whole system on the local cluster; stops by itself
demo: db-up
	go build -o bin/ ./cmd/dispatcher ./cmd/refconsumer ./cmd/outboxctl
	go run ./cmd/demo -server "$(DATABASE_URL)" -bin bin

schema: migrate
	pg_dump --schema-only --no-owner=false --schema=outbox --schema=inbox "$(PGOUTBOX_URL)" > docs/schema.sql

clean: db-destroy
