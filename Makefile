# pgoutbox — every target starts the local throw-away cluster first unless DATABASE_URL is set.
SHELL := /bin/bash
export GOFLAGS ?= -mod=mod

# Without DATABASE_URL the project's own throw-away cluster is used (scripts/pg.sh): DATABASE_URL
# is its maintenance database (tests create their own databases from it) and PGOUTBOX_URL the
# application database that `make migrate`, outboxctl and the demo use. With DATABASE_URL set by
# the caller, that cluster is used as is and PGOUTBOX_URL defaults to DATABASE_URL.
ifeq ($(origin DATABASE_URL),undefined)
DATABASE_URL := $(shell scripts/pg.sh url postgres)
PGOUTBOX_URL ?= $(shell scripts/pg.sh url pgoutbox)
PGOUTBOX_LOCAL_CLUSTER := 1
else ifneq ($(PGOUTBOX_LOCAL_CLUSTER),1)
PGOUTBOX_URL ?= $(DATABASE_URL)
endif
export DATABASE_URL PGOUTBOX_URL PGOUTBOX_LOCAL_CLUSTER

GO_TEST_FLAGS ?= -count=1 -timeout 40m

.PHONY: setup lint chromium all build db-up db-down db-destroy db-reset db-url migrate migrate-reference sql-defs migration sql-release test test-go check-sql-api fuzz bench bench-river bench-plans demo demo-cutover soak schema clean node-deps

all: build

build:
	go build ./...

# With DATABASE_URL from the caller the cluster is theirs: nothing is started or stopped.
ifeq ($(PGOUTBOX_LOCAL_CLUSTER),1)
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

## db-reset: drop and recreate the local application database, then migrate it
db-reset: db-up
	psql "$(DATABASE_URL)" -qc 'DROP DATABASE IF EXISTS pgoutbox WITH (FORCE)' -c 'CREATE DATABASE pgoutbox TEMPLATE template0 ENCODING UTF8'
	$(MAKE) --no-print-directory migrate > /dev/null

db-url:
	@echo $(DATABASE_URL)

## migrate: apply sql/ with the tern CLI pinned in go.mod (re-running is a no-op)
migrate: db-up
	go tool tern migrate -m sql --conn-string "$(PGOUTBOX_URL)"

## migrate-reference: the kernel's migrations, then the reference (OceanWay) release through the
## kernel's registration functions (receipt kinds, destinations, refinements, projection version,
## observation schemas) and the reference schemas (SPEC D-1); re-running is a no-op
migrate-reference: migrate
	go run ./cmd/outboxctl -db "$(PGOUTBOX_URL)" reference install

## sql-defs: rewrite the current-definition files sql/functions/<schema>/<function>.sql and
## sql/triggers/<schema>/<table>.sql from a fresh install of sql/ in a throw-away database on the
## cluster of DATABASE_URL (docs/migrations.md); the same sql/ always gives the same bytes
sql-defs: db-up
	go run ./tools/sqldefs -server "$(DATABASE_URL)"

## migration: NAME=what_changes writes the next sql/NNN_what_changes.sql, once, from the definition
## files that differ from a fresh install (edit a function or trigger file first), then rewrites
## the files from a fresh install that includes it; review the migration and commit both
migration: db-up
	@if [ -z "$(NAME)" ]; then echo "usage: make migration NAME=what_changes" >&2; exit 2; fi
	go run ./tools/sqldefs -server "$(DATABASE_URL)" -migration "$(NAME)"

## sql-release: RELEASE=r3 FROM=41 TO=48 pins the migrations FROM..TO in sql/released.sha256 as a
## release (rendered by tern's loader first; literal SQL renders to itself)
sql-release:
	@if [ -z "$(RELEASE)" ] || [ -z "$(FROM)" ] || [ -z "$(TO)" ]; then echo "usage: make sql-release RELEASE=r3 FROM=41 TO=48" >&2; exit 2; fi
	go run ./tools/sqlrelease -release "$(RELEASE)" -from "$(FROM)" -to "$(TO)"

## node-deps: the second-language consumer's packages (examples/node-consumer, pinned by its
## package-lock.json) into its git-ignored node_modules; skipped with a note when npm is absent
## (the test then skips too when node is absent). As root on a Debian-like machine without npm
## it installs nodejs and npm from the distribution first (CI's clean machine).
node-deps:
	@if ! command -v npm >/dev/null 2>&1 && [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "node-deps: installing nodejs and npm from the distribution" >&2; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm) >&2; fi
	@if command -v npm >/dev/null 2>&1; then cd examples/node-consumer && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "node-deps: npm not found; TestNodeConsumerWithDispatcher will skip without node"; fi

## chromium: the headless browser the status-page test drives (R-OP-4): Debian's chromium,
## installed as root with apt-get when missing; otherwise a note (TestStatusPageChromium skips).
chromium:
	@if ! command -v chromium >/dev/null 2>&1 && [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "chromium: installing Debian's chromium" >&2; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2; fi
	@command -v chromium >/dev/null 2>&1 || echo "chromium: not installed; TestStatusPageChromium will skip"

## setup: what the tests need beyond Go (the Node consumer's packages, headless chromium);
## idempotent, a no-op when both are present
setup: node-deps chromium

## lint: gofmt-clean, go vet (also the bench-tagged code) and staticcheck (a go.mod tool, so the
## version is pinned and nothing is installed globally)
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$unformatted" ]; then \
		echo "lint: not gofmt-clean:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go vet -tags bench ./bench/...
	go tool staticcheck ./...

## test: everything, against real PostgreSQL
test: db-up build setup lint
	go test $(GO_TEST_FLAGS) ./...
	go test $(GO_TEST_FLAGS) -tags pgrestart -run TestPostgresRestart ./tests/e2e/
	$(MAKE) --no-print-directory fuzz FUZZTIME=20000x
	$(MAKE) --no-print-directory check-sql-api

## fuzz: bounded cross-implementation fuzzing of the two canonicalizers (D-2, T-6); make test bounds
## it by a count of inputs, not a duration (a duration ends with "context deadline exceeded" when
## an input is still in the database at the deadline on a loaded machine)
FUZZTIME ?= 30s
fuzz: db-up
	go test ./tests/kernel -run '^$$' -fuzz FuzzCanonicalAgreement -fuzztime $(FUZZTIME) -fuzzminimizetime 200x
	go test ./internal/canon -run '^$$' -fuzz FuzzCanonicalizeIdempotent -fuzztime $(FUZZTIME)

## check-sql-api: an external checker of the public SQL API, when one is present (optional; the
## project's own tests do not depend on it)
CHECK_SQL_API ?= ../shared/tools/check-sql-api
check-sql-api: db-up
	@go tool tern migrate -m sql --conn-string "$(PGOUTBOX_URL)" > /dev/null
	@if [ -n "$(CHECK_SQL_API)" ] && [ -x "$(CHECK_SQL_API)" ]; then "$(CHECK_SQL_API)" "$(PGOUTBOX_URL)"; \
	else echo "check-sql-api: no external checker at $(CHECK_SQL_API), skipped"; fi

## bench: benchmarks against the local cluster (fsync on); never part of make test. First the
## side by side with River (SPEC §12a P-1, P-2: River and pgoutbox alternating, same cluster,
## same run), then the Go benchmarks of bench/; both go into docs/performance.md.
BENCHTIME ?= 2000x
## BENCH_RIVER_N jobs = events per side-by-side run, BENCH_RIVER_ROUNDS rounds (alternating pairs,
## P-7: at least 3) of the four runs (six with P-6),
## BENCH_RIVER_PAYLOAD bytes of payload (River's job args and the event payload).
BENCH_RIVER_N ?= 20000
BENCH_RIVER_ROUNDS ?= 3
BENCH_RIVER_PAYLOAD ?= 400
export BENCH_RIVER_N BENCH_RIVER_ROUNDS BENCH_RIVER_PAYLOAD
bench: db-up
	scripts/bench-river.sh bench-river.out
	rm -f bench-plans.out
	PLAN_OUT=$(CURDIR)/bench-plans.out go test -tags bench -run '^$$' -bench . -benchtime $(BENCHTIME) -timeout 60m ./bench/ | tee bench.out
	go run ./tools/benchreport -in bench.out -river bench-river.out -plans bench-plans.out -out docs/performance.md -db "$(DATABASE_URL)"

## bench-river: only the side by side with River; replaces just that section of docs/performance.md
## (quick iteration: make bench-river BENCH_RIVER_N=5000 BENCH_RIVER_ROUNDS=1; the scale curve of
## R-DP-9 runs too unless BENCH_RIVER_CURVE=0, BENCH_CURVE_N events per run, default 5000)
bench-river: db-up
	scripts/bench-river.sh bench-river.out
	go run ./tools/benchreport -in "" -river bench-river.out -out docs/performance.md -db "$(DATABASE_URL)"

## bench-plans: only BenchmarkPlanStability (HP-3: the batch path twice in one session from an
## empty, unanalyzed database, and run 2's plans); replaces just its section of docs/performance.md
bench-plans: db-up
	rm -f bench-plans.out
	PLAN_OUT=$(CURDIR)/bench-plans.out go test -tags bench -run '^$$' -bench BenchmarkPlanStability -benchtime 1x -timeout 30m ./bench/
	go run ./tools/benchreport -in "" -plans bench-plans.out -out docs/performance.md -db "$(DATABASE_URL)"

## demo: the whole system on the local cluster; stops by itself
demo: db-up setup
	go build -o bin/ ./cmd/dispatcher ./cmd/refconsumer ./cmd/outboxctl
	go run ./tools/demo -server "$(DATABASE_URL)" -bin bin

## demo-cutover: the projection cutover (SPEC §11b) in a database of its own: operations_timeline
## v2 rebuilt while producers run, frozen, dual-applied, switched, rolled back; proofs and digests
demo-cutover: db-up
	go run ./tools/demo -server "$(DATABASE_URL)" -cutover

## soak: the bounded soak of T-8 (100k events, 4 reference consumers, 5 % injected failures,
## lost acks, 2 dispatcher restarts); writes docs/soak-report.md; stops by itself
SOAK_FLAGS ?=
soak: db-up
	go run ./tools/soak -server "$(DATABASE_URL)" $(SOAK_FLAGS)

schema: migrate
	pg_dump --schema-only --no-owner=false --schema=outbox --schema=inbox "$(PGOUTBOX_URL)" > docs/schema.sql

clean: db-destroy
