#!/usr/bin/env bash
# A private, throw-away PostgreSQL server for slurmsched's tests and benchmarks.
#
#   contrib/dev-db/postgres.sh start DIR [PORT]   # prints the SQLAlchemy URL of database "slurmsched"
#   contrib/dev-db/postgres.sh stop DIR
#
# On Debian 12 as root: installs the `postgresql` package if its binaries are missing
# (PostgreSQL 15, /usr/lib/postgresql/15/bin), runs initdb as user `postgres` into
# DIR/data, and starts the server listening ONLY on a Unix socket in DIR/sock (no TCP, so
# it never collides with another server; PORT, default 5432, just names the socket).
# Local connections are trusted: use it for tests, never for real data. `start` is
# idempotent: with the server already running it only prints the URL again. `stop`
# stops only the server whose data directory is DIR/data (pg_ctl reads its pid file).
#
# Environment:
#   SLURMSCHED_PG_FAST=1   turn off fsync/synchronous_commit/full_page_writes (tests);
#                          leave unset for durable settings (benchmarks).
#   SLURMSCHED_PG_BIN      PostgreSQL bin directory (default /usr/lib/postgresql/15/bin)
set -euo pipefail

BIN=${SLURMSCHED_PG_BIN:-/usr/lib/postgresql/15/bin}
log() { echo "dev-db: $*" >&2; }
die() { echo "dev-db: error: $*" >&2; exit 1; }

usage() { die "usage: $0 start DIR [PORT] | stop DIR"; }

# as_owner CMD...: run CMD as the server's owner (`postgres` when we are root).
as_owner() {
    if [[ $EUID -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

install_postgres() {
    [[ -x $BIN/initdb ]] && return 0
    [[ $EUID -eq 0 ]] || die "$BIN/initdb is missing; install Debian's postgresql package as root"
    log "installing postgresql with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    [[ -x $BIN/initdb ]] || die "postgresql installed but $BIN/initdb is missing (set SLURMSCHED_PG_BIN)"
}

start() {
    local dir=$1 port=$2 data sock
    data="$dir/data"
    sock="$dir/sock"
    install_postgres
    if [[ $EUID -eq 0 ]]; then
        install -d -o postgres -g postgres -m 700 "$dir" "$sock"
    else
        install -d -m 700 "$dir" "$sock"
    fi
    if [[ ! -s $data/PG_VERSION ]]; then
        log "initdb into $data"
        as_owner "$BIN/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    fi
    if ! as_owner "$BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        local opts="-c listen_addresses= -k $sock -p $port"
        if [[ ${SLURMSCHED_PG_FAST:-0} == 1 ]]; then
            opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        fi
        log "starting PostgreSQL (socket $sock/.s.PGSQL.$port)"
        as_owner "$BIN/pg_ctl" -D "$data" -o "$opts" -l "$dir/server.log" -w -t 60 start >/dev/null ||
            die "PostgreSQL did not start; see $dir/server.log"
    fi
    local exists
    exists=$(as_owner "$BIN/psql" -h "$sock" -p "$port" -U postgres -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'slurmsched'")
    if [[ $exists != 1 ]]; then
        as_owner "$BIN/createdb" -h "$sock" -p "$port" -U postgres slurmsched
    fi
    echo "postgresql+psycopg://postgres@/slurmsched?host=$sock&port=$port"
}

stop() {
    local data="$1/data"
    [[ -s $data/PG_VERSION ]] || die "no PostgreSQL data directory in $1"
    if as_owner "$BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        as_owner "$BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null
        log "stopped PostgreSQL in $1"
    fi
}

[[ $# -ge 2 ]] || usage
case $1 in
    start)
        [[ $# -le 3 ]] || usage
        [[ $2 == /* ]] || die "DIR must be an absolute path, got '$2'"
        port=${3:-5432}
        [[ $port =~ ^[0-9]+$ ]] && ((port >= 1024 && port <= 65535)) || die "PORT must be 1024-65535, got '$port'"
        start "$2" "$port"
        ;;
    stop)
        [[ $# -eq 2 ]] || usage
        stop "$2"
        ;;
    *) usage ;;
esac
