# Shared by up.sh and down.sh (sourced): pick the container engine and the compose command.
#
# Docker is used where a Docker engine answers (`docker info`) and has `docker compose`;
# otherwise rootful podman with podman-compose. SLURMSCHED_ENGINE=docker|podman forces one.
# With podman, CONTAINERS_CONF points at contrib/compose/containers.conf (runc, lower
# ulimits), so the machine's own /etc/containers stays untouched.

COMPOSE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$COMPOSE_DIR/../.." && pwd)
PROJECT=slurmsched  # also `name:` in docker-compose.yml; down.sh removes only this project

docker_answers() {
    command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 && docker compose version >/dev/null 2>&1
}

podman_compose_bin() {  # podman-compose from PATH, else the repository's .venv (contrib/setup.sh)
    if command -v podman-compose >/dev/null 2>&1; then
        command -v podman-compose
    elif [ -x "$ROOT/.venv/bin/podman-compose" ]; then
        echo "$ROOT/.venv/bin/podman-compose"
    else
        echo podman-compose
    fi
}

pick_engine() {
    case "${SLURMSCHED_ENGINE:-}" in
        docker) ENGINE=docker ;;
        podman) ENGINE=podman ;;
        "") if docker_answers; then ENGINE=docker; else ENGINE=podman; fi ;;
        *) echo "SLURMSCHED_ENGINE must be docker or podman (got '$SLURMSCHED_ENGINE')" >&2; return 1 ;;
    esac
    if [ "$ENGINE" = docker ]; then
        COMPOSE=(docker compose -p "$PROJECT" -f "$ROOT/docker-compose.yml")
    else
        export CONTAINERS_CONF="$COMPOSE_DIR/containers.conf"
        COMPOSE=("$(podman_compose_bin)" -p "$PROJECT" -f "$ROOT/docker-compose.yml")
    fi
}

# Timing of each step, printed as "[compose] STEP: N s".
step_start() { STEP_NAME=$1; STEP_T0=$EPOCHREALTIME; echo "[compose] $STEP_NAME ..." >&2; }
step_end() {
    awk -v n="$STEP_NAME" -v a="$STEP_T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "[compose] %s: %.1f s\n", n, b - a }' >&2
}
