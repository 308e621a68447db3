#!/usr/bin/env bash
# Throw-away local PostgreSQL cluster for development, tests and the demo.
#   scripts/pg.sh up|down|url|status
# The cluster lives in .pgdata/ inside the checkout when the postgres OS user can reach it,
# otherwise under /tmp/pgoutbox-<hash of the checkout path>. Port and socket are derived from
# the same hash, so two checkouts never share a cluster. DATABASE_URL overrides everything:
# with it set, `up` and `down` do nothing and `url` prints it.
#
# The cluster preloads pg_stat_statements (track = all: the statements inside PL/pgSQL functions
# are counted too) and tracks function calls (track_functions = all), so `make bench` can print
# the per-statement budget (SPEC §12a HP-6) and tests can count function calls (HP-1). A running
# cluster created before these settings is restarted by `up` with them (see ensure_conf).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
hash=$(printf '%s' "$top" | cksum | cut -d' ' -f1)
port=$(( 20000 + hash % 20000 ))
pgbin=${PGBIN:-/usr/lib/postgresql/15/bin}
if [ ! -x "$pgbin/initdb" ] && command -v initdb >/dev/null 2>&1; then
  pgbin=$(dirname "$(readlink -f "$(command -v initdb)")")
fi
if [ ! -x "$pgbin/initdb" ] && [ "${1:-}" = up ] && [ -z "${DATABASE_URL:-}" ]; then
  # Not on this machine: install the server from Debian's packages (root only).
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "pg.sh: PostgreSQL 15 server binaries not found; installing postgresql-15" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15) >&2
  fi
  [ -x "$pgbin/initdb" ] || { echo "pg.sh: initdb not found (install PostgreSQL 15 or set DATABASE_URL)" >&2; exit 1; }
fi

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# DATABASE_URL means nothing local is touched: `up`/`down` do nothing and `url` prints it,
# before any folder is created (`make migrate DATABASE_URL=…` must not leave a .pgdata/ behind).
if [ -n "${DATABASE_URL:-}" ]; then
  case "${1:-}" in
    up|down) exit 0 ;;
    url) echo "$DATABASE_URL"; exit 0 ;;
  esac
fi

base="$top/.pgdata"
if [ "$(id -u)" -eq 0 ]; then
  mkdir -p "$base" 2>/dev/null || true
  chown postgres: "$base" 2>/dev/null || true
  if ! runuser -u postgres -- test -w "$base" 2>/dev/null; then
    base="/tmp/pgoutbox-$hash"
    mkdir -p "$base"; chown postgres: "$base"
  fi
else
  mkdir -p "$base"
fi
data="$base/data"
sock="$base/sock"
# The port is derived from the checkout path; if another server already listens there before the
# cluster exists, the next free one is taken and remembered in $base/port. The first `url` or
# `up` makes that choice: make computes the URL (`url`) before it runs `up`, so both must agree.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ -f "$base/port" ]; then
  port=$(cat "$base/port")
elif { [ "${1:-}" = up ] || [ "${1:-}" = url ]; } && [ -z "${DATABASE_URL:-}" ] && [ ! -f "$data/PG_VERSION" ]; then
  while port_busy "$port"; do port=$((port + 1)); done
  echo "$port" > "$base/port"
fi
dbname=${2:-postgres}
url="postgres://postgres@127.0.0.1:$port/$dbname?sslmode=disable"

running() { as_pg "$pgbin/pg_ctl" -D "$data" status >/dev/null 2>&1; }

# ensure_conf appends the statistics settings to a cluster's postgresql.conf once (clusters made
# before they existed get them too); the last occurrence of a setting wins in postgresql.conf.
ensure_conf() {
  grep -q '^# pgoutbox: statement statistics' "$data/postgresql.conf" 2>/dev/null && return 0
  as_pg tee -a "$data/postgresql.conf" >/dev/null <<CONF
# pgoutbox: statement statistics (SPEC §12a HP-6 budget, HP-1 function calls)
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
pg_stat_statements.max = 10000
track_functions = all
CONF
}

case "${1:-}" in
  up)
    if [ -n "${DATABASE_URL:-}" ]; then exit 0; fi
    if [ ! -f "$data/PG_VERSION" ]; then
      as_pg mkdir -p "$data" "$sock"
      as_pg "$pgbin/initdb" -D "$data" -U postgres -E UTF8 --locale=C.UTF-8 --auth=trust >"$base/initdb.log" 2>&1 \
        || { cat "$base/initdb.log"; exit 1; }
      cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sock'
max_connections = 300
shared_buffers = 256MB
fsync = on
synchronous_commit = on
log_min_messages = warning
CONF
    fi
    ensure_conf
    if running && [ "$(as_pg "$pgbin/psql" -h "$sock" -p "$port" -U postgres -d postgres -qAtX \
          -c "SELECT current_setting('shared_preload_libraries') LIKE '%pg_stat_statements%'" 2>/dev/null)" != t ]; then
      # A cluster started before pg_stat_statements was configured: restart it with it (HP-6).
      echo "pg.sh: restarting the cluster to preload pg_stat_statements" >&2
      as_pg "$pgbin/pg_ctl" -D "$data" -l "$base/server.log" -m fast -w -t 60 restart >/dev/null \
        || { tail -n 30 "$base/server.log"; exit 1; }
    fi
    if ! running; then
      as_pg mkdir -p "$sock"
      as_pg "$pgbin/pg_ctl" -D "$data" -l "$base/server.log" -w -t 60 start >/dev/null \
        || { tail -n 30 "$base/server.log"; exit 1; }
    fi
    # The application database used by `make migrate` and the demo.
    as_pg "$pgbin/psql" -h "$sock" -p "$port" -U postgres -d postgres -qAtX \
      -c "SELECT 1 FROM pg_database WHERE datname = 'pgoutbox'" | grep -q 1 \
      || as_pg "$pgbin/createdb" -h "$sock" -p "$port" -U postgres -E UTF8 -T template0 pgoutbox
    ;;
  down)
    if [ -n "${DATABASE_URL:-}" ]; then exit 0; fi
    if running; then as_pg "$pgbin/pg_ctl" -D "$data" -m fast -w stop >/dev/null; fi
    ;;
  restart)
    as_pg "$pgbin/pg_ctl" -D "$data" -l "$base/server.log" -m fast -w restart >/dev/null
    ;;
  destroy)
    "$0" down; rm -rf "$base"
    ;;
  url)
    # url [DBNAME]: the local cluster's URL for DBNAME (default postgres); DATABASE_URL wins.
    if [ -n "${DATABASE_URL:-}" ]; then echo "$DATABASE_URL"; else echo "$url"; fi
    ;;
  status)
    if running; then echo "running on port $port ($data)"; else echo "stopped ($data)"; exit 1; fi
    ;;
  *) echo "usage: $0 up|down|restart|destroy|url [DBNAME]|status" >&2; exit 2 ;;
esac
