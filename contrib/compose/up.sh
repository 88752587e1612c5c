#!/bin/bash
# Bring up slurmsched's compose cluster (docker-compose.yml): Slurm 24.11 with accounting,
# four fake-GPU nodes and the slurmsched daemon in its own container. Idempotent.
#
#   contrib/compose/up.sh [--postgres]
#
# Uses `docker compose` where a Docker engine answers, else podman + podman-compose (installed
# from Debian/PyPI when missing; runc and lower ulimits through contrib/compose/containers.conf).
# The debian:trixie base image is pulled, or built with debootstrap where no registry answers.
# Each image is built once (later runs hit the build cache); containers whose image changed
# are recreated. Returns once every health check passes: all nodes idle or busy, and the
# daemon has a scheduling cycle on record. Prints the time of each step.
#
# Environment: SLURMSCHED_ENGINE=docker|podman, SLURMSCHED_DEBIAN_MIRROR (debootstrap),
# SLURMSCHED_DAEMON_INTERVAL_S (daemon cycle, default 10), SLURMSCHED_COMPOSE_TIMEOUT (s, 300).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

postgres=0
for arg in "$@"; do
    case "$arg" in
        --postgres) postgres=1 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "up.sh: unknown option $arg (try --help)" >&2; exit 2 ;;
    esac
done

# Containers with a health check (in docker-compose.yml), all of which must pass.
CHECKED=(slurmsched-mariadb slurmsched-slurmdbd slurmsched-slurmctld slurmsched-gpu01
         slurmsched-gpu02 slurmsched-gpu03 slurmsched-gpu04 slurmsched-daemon)
TARGETS=(slurm:24.11 mariadb:latest daemon:latest)  # Dockerfile target:tag (as in docker-compose.yml)

install_podman_tools() {
    # By package, not by command: netavark (podman's network stack, under /usr/lib/podman) runs
    # iptables; a host with podman but without either fails every build step with
    # "netavark: No such file or directory".
    local missing=() pkg
    for pkg in podman runc debootstrap netavark aardvark-dns iptables; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q ' installed$' || missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "[compose] installing ${missing[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if [ "${COMPOSE[0]}" = podman-compose ] && ! command -v podman-compose >/dev/null 2>&1; then
        if [ -x "$ROOT/.venv/bin/pip" ]; then
            "$ROOT/.venv/bin/pip" install -q 'podman-compose>=1.2'
            COMPOSE[0]=$ROOT/.venv/bin/podman-compose
        else
            python3 -m pip install -q 'podman-compose>=1.2' \
                || python3 -m pip install -q --break-system-packages 'podman-compose>=1.2'
        fi
    fi
}

ensure_base() {  # ensure_base SUITE: debian:SUITE exists locally (pulled or debootstrapped)
    local suite=$1 ref="docker.io/library/debian:$1" dir
    "$ENGINE" image inspect "$ref" >/dev/null 2>&1 && return 0
    timeout 120 "$ENGINE" pull -q "$ref" >/dev/null 2>&1 && return 0
    echo "[compose] no registry answers: building $ref with debootstrap" >&2
    command -v debootstrap >/dev/null 2>&1 || {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    dir=$(mktemp -d /var/tmp/slurmsched-debootstrap.XXXXXX)
    trap 'rm -rf "$dir"' RETURN
    debootstrap --variant=minbase "$suite" "$dir" "${SLURMSCHED_DEBIAN_MIRROR:-http://deb.debian.org/debian}" \
        > "$dir.log" 2>&1 || { tail -20 "$dir.log" >&2; rm -f "$dir.log"; return 1; }
    rm -f "$dir.log"
    tar -C "$dir" -c . | "$ENGINE" import - "$ref" >/dev/null
}

build_images() {
    local item
    for item in "${TARGETS[@]}"; do
        "$ENGINE" build -q -f "$COMPOSE_DIR/Dockerfile" --target "${item%%:*}" \
            -t "localhost/slurmsched/$item" "$ROOT" >/dev/null
    done
    # Earlier builds of this project's images, now untagged (only ours: by label).
    "$ENGINE" image prune -f --filter label=org.slurmsched.compose=1 >/dev/null 2>&1 || true
}

compose_up() {
    local out services
    if [ "$ENGINE" = docker ]; then
        out=$("${COMPOSE[@]}" up -d 2>&1) || { echo "$out" >&2; return 1; }
        return 0
    fi
    # podman-compose turns depends_on into `podman --requires`, which ties every container to
    # the one-shot init container (a later `podman restart slurmsched-slurmctld` then fails).
    # So: run init to completion first, then start the services without --requires; each
    # entrypoint waits for what it needs (munge key, MariaDB, slurmdbd, slurmctld).
    out=$("${COMPOSE[@]}" up -d --no-deps init 2>&1) || { echo "$out" >&2; return 1; }
    if [ "$(podman wait slurmsched-init)" != 0 ]; then
        podman logs slurmsched-init >&2; return 1
    fi
    services=$("${COMPOSE[@]}" config --services 2>/dev/null | grep -vx init)
    out=$("${COMPOSE[@]}" up -d --no-deps $services 2>&1) || { echo "$out" >&2; return 1; }
}

recreate_stale() {  # podman-compose keeps containers whose image was rebuilt; docker does not
    [ "$ENGINE" = podman ] || return 0
    local stale=() services=() c running want
    for c in $(podman ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}'); do
        running=$(podman container inspect -f '{{.Image}}' "$c")
        want=$(podman image inspect -f '{{.Id}}' "$(podman container inspect -f '{{.ImageName}}' "$c")" 2>/dev/null || true)
        if [ -n "$want" ] && [ "$running" != "$want" ]; then
            stale+=("$c")
            services+=("$(podman container inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' "$c")")
        fi
    done
    [ ${#stale[@]} -gt 0 ] || return 0
    echo "[compose] recreating (image changed): ${services[*]}" >&2
    # rm -f first: a container in a restart loop can come back between compose's stop and rm
    podman rm -f "${stale[@]}" >/dev/null
    local out
    if [[ " ${services[*]} " == *" init "* ]]; then
        out=$("${COMPOSE[@]}" up -d --no-deps init 2>&1) || { echo "$out" >&2; return 1; }
        podman wait slurmsched-init >/dev/null
    fi
    out=$("${COMPOSE[@]}" up -d --no-deps "${services[@]}" 2>&1) || { echo "$out" >&2; return 1; }
}

healthy() {  # healthy CONTAINER: its compose health check passes now
    if [ "$ENGINE" = podman ]; then
        podman healthcheck run "$1" >/dev/null 2>&1
    else
        [ "$(docker inspect -f '{{.State.Health.Status}}' "$1" 2>/dev/null)" = healthy ]
    fi
}

wait_ready() {
    local deadline=$((SECONDS + ${SLURMSCHED_COMPOSE_TIMEOUT:-300})) c pending
    while :; do
        pending=()
        for c in "${CHECKED[@]}"; do healthy "$c" || pending+=("$c"); done
        [ ${#pending[@]} -eq 0 ] && return 0
        if [ $SECONDS -ge $deadline ]; then
            echo "[compose] not ready after ${SLURMSCHED_COMPOSE_TIMEOUT:-300} s: ${pending[*]}" >&2
            for c in "${pending[@]}"; do
                echo "----- $c" >&2; "$ENGINE" logs --tail 30 "$c" >&2 || true
            done
            return 1
        fi
        sleep 2
    done
}

t_all=$EPOCHREALTIME
step_start "container engine"
pick_engine
[ "$ENGINE" = podman ] && install_podman_tools
if [ $postgres = 1 ]; then
    COMPOSE+=(--profile postgres)
    TARGETS+=(postgres:latest)
    CHECKED+=(slurmsched-postgres)
    export SLURMSCHED_DB_URL=postgresql+psycopg://slurmsched@postgres/slurmsched
fi
echo "[compose] engine: $ENGINE" >&2
step_end

step_start "base image debian:trixie"
ensure_base trixie
step_end

step_start "image build"
build_images
step_end

step_start "cluster up"
compose_up
recreate_stale
wait_ready
step_end

awk -v a="$t_all" -v b="$EPOCHREALTIME" 'BEGIN { printf "[compose] total: %.1f s\n", b - a }' >&2
cat <<EOF
slurmsched compose cluster is up ($ENGINE, project $PROJECT). Try:
  $ENGINE exec slurmsched-slurmctld sinfo
  $ENGINE exec slurmsched-slurmctld sbatch --wrap 'sleep 60' --gres=gpu:a100:2
  $ENGINE exec slurmsched-daemon slurmsched status
Stop it with contrib/compose/down.sh
EOF
