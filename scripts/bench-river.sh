#!/usr/bin/env bash
# Side by side with River (SPEC §12a P-1, P-2, P-6, P-3): River and pgoutbox alternating on the same
# cluster in the same run, every result line collected into one file for tools/benchreport.
#
#   scripts/bench-river.sh OUT        (DATABASE_URL: superuser URL of the cluster's maintenance db)
#
# Per round: river backlog, pgoutbox p1, the P-8 ceiling (plain SQL), river concurrent, pgoutbox p2, and (P-6) river
# insertmany, pgoutbox p6 when both binaries know those modes (their -h names them). Each round
# is one alternating pair per figure; P-7 asks for at least 3, so the report can show the spread
# (tools/benchreport: median, min..max, per-pair ratios, BIMODAL). Environment knobs:
# BENCH_RIVER_N (events = jobs per run, default 20000), BENCH_RIVER_ROUNDS (default 3),
# BENCH_RIVER_PAYLOAD (bytes, default 400), BENCH_P6_N (envelopes of the P-6 append run, default
# 50000), BENCH_RIVER_FLAGS / BENCH_OUTBOX_FLAGS (extra flags for bench/river/cmd/riverbench and
# bench/outboxbench).
#
# Scale curve (SPEC R-DP-9, issue 40 item 4), when BENCH_RIVER_CURVE=1 (the default): in each of
# the first BENCH_CURVE_ROUNDS rounds (default 1), P-1 with 1, 2 and 4 dispatcher connections
# (outboxbench -workers W) and 1 and 4 destinations (-destinations D: each event has D
# deliveries), each right after its River counterpart (riverbench -mode backlog -pool-conns W
# -jobs-per-event D: a pool of W connections, poll-only, D jobs per event); BENCH_CURVE_N events
# per run (default 5000). Their RESULT lines carry label=curve, so tools/benchreport keeps them
# out of the P-1 figures and renders them as the "Scale curve" table; their budget lines are not
# collected.
#
# Besides the RESULT lines, outboxbench's BUDGET / STMT / FUNC lines (HP-6 per-statement budget)
# are collected, each tagged with its round.
#
# River lives in a Go module of its own (bench/river) so the product's go.mod never depends on
# it; its modules are downloaded here through the module proxy (GOPROXY) on first use.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/bench-river.sh OUT}
: "${DATABASE_URL:?DATABASE_URL must name the maintenance database of the cluster}"
n=${BENCH_RIVER_N:-20000}
rounds=${BENCH_RIVER_ROUNDS:-3}
p6n=${BENCH_P6_N:-50000}
curve=${BENCH_RIVER_CURVE:-1}
curven=${BENCH_CURVE_N:-5000}
curverounds=${BENCH_CURVE_ROUNDS:-1}
payload=${BENCH_RIVER_PAYLOAD:-400}

mkdir -p "$top/bin"
echo "bench-river: building bench/river (River module) and bench/outboxbench" >&2
(cd "$top/bench/river" && GOWORK=off go mod download && GOWORK=off go build -o "$top/bin/riverbench" ./cmd/riverbench)
(cd "$top" && go build -tags bench -o "$top/bin/outboxbench" ./bench/outboxbench)
(cd "$top" && go build -o "$top/bin/dispatcher" ./cmd/dispatcher) # P-3 runs the real dispatcher binary

cpu=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
{
  echo "# scripts/bench-river.sh $(date -u '+%Y-%m-%d %H:%M UTC'): n=$n rounds=$rounds payload=$payload$([ "$curve" = 1 ] && echo " curve_n=$curven curve_rounds=$curverounds")"
  echo "MACHINE $(nproc) cores${cpu:+, $cpu}, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?') at start"
} > "$out"

step() { # step ROUND CMD -server URL -mode MODE ...: one measurement, its lines tagged with the round
  local r=$1; shift
  echo "bench-river: round $r: $(basename "$1") $5" >&2
  local res
  res=$("$@") || { echo "bench-river: failed: $*" >&2; exit 1; }
  grep -q '^RESULT ' <<<"$res" || { echo "bench-river: no RESULT line: $*" >&2; exit 1; }
  # round=R right after "<system> <mode>" (keys are read anywhere in the line; STMT lines end
  # with their query text)
  grep -E '^(RESULT|BUDGET|STMT|CSTMT|FUNC) ' <<<"$res" | sed -E "s/^((RESULT|BUDGET|STMT|CSTMT|FUNC) [^ ]+ [^ ]+)/\1 round=$r/" >> "$out"
  grep '^RESULT ' <<<"$res" >&2
}

curve_step() { # curve_step ROUND CMD ...: one scale-curve measurement; only its RESULT line is kept
  local r=$1; shift
  echo "bench-river: round $r: curve: $(basename "$1") ${*:4}" >&2
  local res
  res=$("$@") || { echo "bench-river: failed: $*" >&2; exit 1; }
  grep -q '^RESULT .* label=curve' <<<"$res" || { echo "bench-river: no RESULT line with label=curve: $*" >&2; exit 1; }
  grep '^RESULT ' <<<"$res" | sed -E "s/^(RESULT [^ ]+ [^ ]+)/\1 round=$r/" | tee -a "$out" >&2
}

# P-6 (append_events vs InsertMany) lands from another branch: run it only when both binaries
# name the mode in their usage.
p6=0
river_usage=$("$top/bin/riverbench" -h 2>&1 || true)
outbox_usage=$("$top/bin/outboxbench" -h 2>&1 || true)
if grep -qw insertmany <<<"$river_usage" && grep -qw p6 <<<"$outbox_usage"; then
  p6=1
else
  echo "bench-river: riverbench -mode insertmany / outboxbench -mode p6 not available; P-6 not measured" >&2
fi

# P-3 anchor (issue 21 item 3): end to end over HTTP, River's HTTP worker against the real
# dispatcher + consumer kit, when both binaries know the modes. BENCH_P3_N events per run
# (default 5000).
p3=0
p3n=${BENCH_P3_N:-5000}
if grep -qw p3c <<<"$river_usage" && grep -qw p3c <<<"$outbox_usage"; then
  p3=1
else
  echo "bench-river: riverbench / outboxbench -mode p3 not available; P-3 not measured side by side" >&2
fi

# P-8 (issue 35 item 1): the bare write set of one delivery's life in plain SQL, no checks
# (outboxbench -mode ceiling), right after pgoutbox's P-1 of each round; the report sets
# pgoutbox / ceiling beside pgoutbox / River.
ceil=0
if grep -qw ceiling <<<"$outbox_usage"; then
  ceil=1
fi

for r in $(seq 1 "$rounds"); do
  # shellcheck disable=SC2086
  step "$r" "$top/bin/riverbench" -server "$DATABASE_URL" -mode backlog -n "$n" -payload "$payload" ${BENCH_RIVER_FLAGS:-}
  # shellcheck disable=SC2086
  step "$r" "$top/bin/outboxbench" -server "$DATABASE_URL" -mode p1 -n "$n" -payload "$payload" ${BENCH_OUTBOX_FLAGS:-}
  if [ "$ceil" = 1 ]; then
    # shellcheck disable=SC2086
    step "$r" "$top/bin/outboxbench" -server "$DATABASE_URL" -mode ceiling -n "$n" -payload "$payload" ${BENCH_OUTBOX_FLAGS:-}
  fi
  # shellcheck disable=SC2086
  step "$r" "$top/bin/riverbench" -server "$DATABASE_URL" -mode concurrent -n "$n" -payload "$payload" ${BENCH_RIVER_FLAGS:-}
  # shellcheck disable=SC2086
  step "$r" "$top/bin/outboxbench" -server "$DATABASE_URL" -mode p2 -n "$n" -payload "$payload" ${BENCH_OUTBOX_FLAGS:-}
  if [ "$p6" = 1 ]; then
    # shellcheck disable=SC2086
    step "$r" "$top/bin/riverbench" -server "$DATABASE_URL" -mode insertmany -n "$p6n" -payload "$payload" ${BENCH_RIVER_FLAGS:-}
    # shellcheck disable=SC2086
    step "$r" "$top/bin/outboxbench" -server "$DATABASE_URL" -mode p6 -n "$p6n" -payload "$payload" ${BENCH_OUTBOX_FLAGS:-}
  fi
  if [ "$p3" = 1 ]; then
    for m in p3 p3c; do
      # shellcheck disable=SC2086
      step "$r" "$top/bin/riverbench" -server "$DATABASE_URL" -mode "$m" -n "$p3n" -payload "$payload" ${BENCH_RIVER_FLAGS:-}
      # shellcheck disable=SC2086
      step "$r" "$top/bin/outboxbench" -server "$DATABASE_URL" -mode "$m" -n "$p3n" -payload "$payload" ${BENCH_OUTBOX_FLAGS:-}
    done
  fi
  if [ "$curve" = 1 ] && [ "$r" -le "$curverounds" ]; then
    for d in 1 4; do
      for w in 1 2 4; do
        # shellcheck disable=SC2086
        curve_step "$r" "$top/bin/riverbench" -server "$DATABASE_URL" -mode backlog -n "$curven" -payload "$payload" \
          -pool-conns "$w" -jobs-per-event "$d" -label curve ${BENCH_RIVER_FLAGS:-}
        # shellcheck disable=SC2086
        curve_step "$r" "$top/bin/outboxbench" -server "$DATABASE_URL" -mode p1 -n "$curven" -payload "$payload" \
          -workers "$w" -destinations "$d" -label curve ${BENCH_OUTBOX_FLAGS:-}
      done
    done
  fi
done
echo "MACHINE_END load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?') at end" >> "$out"
