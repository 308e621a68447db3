#!/usr/bin/env bash
# Side by side with River (SPEC §12a P-1, P-2): River and pgoutbox alternating on the same
# cluster in the same run, every result line collected into one file for cmd/benchreport.
#
#   scripts/bench-river.sh OUT        (DATABASE_URL: superuser URL of the cluster's maintenance db)
#
# Per round: river backlog, pgoutbox p1, river concurrent, pgoutbox p2. Environment knobs:
# BENCH_RIVER_N (events = jobs per run, default 20000), BENCH_RIVER_ROUNDS (default 2),
# BENCH_RIVER_PAYLOAD (bytes, default 400), BENCH_RIVER_FLAGS / BENCH_OUTBOX_FLAGS (extra flags
# for bench/river/cmd/riverbench and bench/outboxbench).
#
# River lives in a Go module of its own (bench/river) so the product's go.mod never depends on
# it; its modules are downloaded here through the module proxy (GOPROXY) on first use.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/bench-river.sh OUT}
: "${DATABASE_URL:?DATABASE_URL must name the maintenance database of the cluster}"
n=${BENCH_RIVER_N:-20000}
rounds=${BENCH_RIVER_ROUNDS:-2}
payload=${BENCH_RIVER_PAYLOAD:-400}

mkdir -p "$top/bin"
echo "bench-river: building bench/river (River module) and bench/outboxbench" >&2
(cd "$top/bench/river" && GOWORK=off go mod download && GOWORK=off go build -o "$top/bin/riverbench" ./cmd/riverbench)
(cd "$top" && go build -tags bench -o "$top/bin/outboxbench" ./bench/outboxbench)

cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
{
  echo "# scripts/bench-river.sh $(date -u '+%Y-%m-%d %H:%M UTC'): n=$n rounds=$rounds payload=$payload"
  echo "MACHINE $(nproc) cores${cpu:+, $cpu}, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?') at start"
} > "$out"

step() { # step ROUND CMD -server URL -mode MODE ...: one measurement, its RESULT line tagged with the round
  local r=$1; shift
  echo "bench-river: round $r: $(basename "$1") $5" >&2
  local line
  line=$("$@" | grep '^RESULT ') || { echo "bench-river: failed: $*" >&2; exit 1; }
  echo "$line round=$r" | tee -a "$out"
}

for r in $(seq 1 "$rounds"); do
  # shellcheck disable=SC2086
  step "$r" "$top/bin/riverbench" -server "$DATABASE_URL" -mode backlog -n "$n" -payload "$payload" ${BENCH_RIVER_FLAGS:-}
  # shellcheck disable=SC2086
  step "$r" "$top/bin/outboxbench" -server "$DATABASE_URL" -mode p1 -n "$n" -payload "$payload" ${BENCH_OUTBOX_FLAGS:-}
  # shellcheck disable=SC2086
  step "$r" "$top/bin/riverbench" -server "$DATABASE_URL" -mode concurrent -n "$n" -payload "$payload" ${BENCH_RIVER_FLAGS:-}
  # shellcheck disable=SC2086
  step "$r" "$top/bin/outboxbench" -server "$DATABASE_URL" -mode p2 -n "$n" -payload "$payload" ${BENCH_OUTBOX_FLAGS:-}
done
echo "MACHINE_END load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?') at end" >> "$out"
