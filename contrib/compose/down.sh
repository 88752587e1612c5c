#!/bin/bash
# Stop slurmsched's compose cluster and remove its containers, network and volumes (job
# state, accounting and history database included). Only the compose project `slurmsched`
# is touched; images are kept so the next up.sh starts quickly (--images removes them too).
#
#   contrib/compose/down.sh [--keep-volumes] [--images]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

volumes=(-v)
images=0
for arg in "$@"; do
    case "$arg" in
        --keep-volumes) volumes=() ;;
        --images) images=1 ;;
        -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
        *) echo "down.sh: unknown option $arg (try --help)" >&2; exit 2 ;;
    esac
done

pick_engine
if [ "$ENGINE" = podman ] && ! command -v podman >/dev/null 2>&1; then
    exit 0  # nothing was ever started here
fi
step_start "cluster down"
# Stop them all at once (compose stops one after the other), then let compose remove them.
ids=$("$ENGINE" container ls -q --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null || true)
[ -n "$ids" ] && "$ENGINE" stop -t 10 $ids >/dev/null 2>&1 || true
"${COMPOSE[@]}" --profile postgres down "${volumes[@]}" >/dev/null 2>&1 || true
# Whatever compose missed (e.g. a run container), by the project's label only.
for kind in container volume network; do
    [ "$kind" = volume ] && [ ${#volumes[@]} -eq 0 ] && continue
    all=(); [ "$kind" = container ] && all=(-a)
    ids=$("$ENGINE" "$kind" ls "${all[@]}" -q --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null || true)
    [ -n "$ids" ] && "$ENGINE" "$kind" rm -f $ids >/dev/null 2>&1 || true
done
if [ $images = 1 ]; then
    ids=$("$ENGINE" image ls -q --filter label=org.slurmsched.compose=1 2>/dev/null | sort -u)
    [ -n "$ids" ] && "$ENGINE" image rm -f $ids >/dev/null 2>&1 || true
fi
step_end
