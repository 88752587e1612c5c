#!/usr/bin/env bash
# Install what slurmsched needs on a Debian 12 host (as root) and create ./.venv.
#
#   contrib/setup.sh [EXTRAS]     e.g. contrib/setup.sh test,postgres
#
# apt-get installs only the Debian packages that are missing: the dev cluster's Slurm
# set (see contrib/dev-cluster/lib.sh), python3-venv when `python3 -m venv` cannot work,
# and postgresql when EXTRAS include "postgres". Then `python3 -m venv .venv` (kept if it
# works) and `pip install -e '.[EXTRAS]'` into it, within the upper bounds of
# contrib/constraints.txt. Idempotent; used by contrib/test.sh and contrib/demo.sh.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG_TAG=setup
# shellcheck source=contrib/dev-cluster/lib.sh
source "$REPO/contrib/dev-cluster/lib.sh"
EXTRAS=${1:-}
[[ $EXTRAS =~ ^[a-z0-9,_-]*$ ]] || die "EXTRAS must be a comma-separated list of names, got '$EXTRAS'"
[[ $EUID -eq 0 ]] || die "must run as root (apt-get, and the dev cluster starts slurmd)"

packages=("${DEV_CLUSTER_PACKAGES[@]}")
if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    packages+=(python3 python3-venv)
fi
[[ ,$EXTRAS, == *,postgres,* ]] && packages+=(postgresql)
apt_install_missing "${packages[@]}"

cd "$REPO"
if ! .venv/bin/python -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    log "creating .venv with $(python3 --version)"
    rm -rf .venv
    python3 -m venv .venv
fi
log "pip install -e '.${EXTRAS:+[$EXTRAS]}' into .venv (within contrib/constraints.txt)"
PIP_DISABLE_PIP_VERSION_CHECK=1 .venv/bin/pip install -q -c contrib/constraints.txt -e ".${EXTRAS:+[$EXTRAS]}"
