#!/usr/bin/env bash
# THE test command (README, .ci/run): install everything, start the dev cluster, run the
# whole test suite.
#
#   contrib/test.sh [PYTEST ARGS...]
#
# On a fresh Debian 12 machine as root. Steps: system packages and .venv
# (contrib/setup.sh test,postgres), static checks (pyflakes, mypy; a finding fails the run),
# the compose cluster (contrib/compose/up.sh; left running, stop it with
# contrib/compose/down.sh), the dev Slurm cluster (contrib/dev-cluster/up.sh; left running
# afterwards, stop it with contrib/dev-cluster/down.sh), then pytest over tests/ with every
# marker. Exits non-zero if a step fails, a test fails, or no test ran at all.
# Honours SLURMSCHED_DEV_STATE / SLURMSCHED_DEV_PORT (which dev cluster to use).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
T0=$SECONDS
NAMES=()
STARTS=()
RESULT=""

step() {
    NAMES+=("$*")
    STARTS+=("$SECONDS")
    printf '\n==> [test.sh] %s\n' "$*"
}

finish() {
    local rc=$? i end
    printf '\n==> [test.sh] summary\n'
    for i in "${!NAMES[@]}"; do
        end=${STARTS[i + 1]:-$SECONDS}
        printf '    %-55s %5ss\n' "${NAMES[i]}" $((end - STARTS[i]))
    done
    [[ -n $RESULT ]] && echo "    $RESULT"
    if ((rc == 0)); then
        echo "==> [test.sh] PASSED in $((SECONDS - T0))s"
    else
        echo "==> [test.sh] FAILED (exit $rc) in $((SECONDS - T0))s"
    fi
}
trap finish EXIT

step "system packages and .venv (contrib/setup.sh)"
bash contrib/setup.sh test,postgres

step "static checks: pyflakes, mypy"
.venv/bin/pyflakes slurmsched tests bench
.venv/bin/mypy --ignore-missing-imports slurmsched

step "compose cluster: Slurm 24.11 + daemon in containers (contrib/compose/up.sh)"
# podman (or Docker), the debian:trixie base image, the images (each built once) and the
# containers; the compose tests' fixture runs up.sh again, which then finds it all up.
# Not fatal here: if it fails, the compose tests fail with up.sh's own message.
if [[ " $* " == *"not compose"* ]]; then
    echo "compose tests deselected ($*): no compose cluster"
else
    bash contrib/compose/up.sh </dev/null || echo "contrib/compose/up.sh failed; the compose tests will say why" >&2
fi

step "dev Slurm cluster (contrib/dev-cluster/up.sh)"
# an assignment keeps up.sh's exit status for set -e (a bare eval "$(...)" would hide it)
cluster_env=$(bash contrib/dev-cluster/up.sh </dev/null)
eval "$cluster_env"
echo "SLURM_CONF=$SLURM_CONF ($(sinfo --version))"
LOG_TAG=test
# shellcheck source=contrib/dev-cluster/lib.sh
source contrib/dev-cluster/lib.sh
cancel_jobs_named demo-  # contrib/demo.sh's workload would hold the GPUs the tests need

# Without arguments: the compose tests, then everything else, each with its own summary
# line; with arguments: one pytest run with them.
RC=0
run_pytest() {
    local label=$1 rc=0
    shift
    step "pytest $label"
    .venv/bin/python -m pytest tests -p no:cacheprovider --continue-on-collection-errors --durations=15 "$@" \
        </dev/null || rc=$?
    case $rc in
    0) RESULT+="pytest $label: all tests passed; " ;;
    5) RESULT+="pytest $label: NO TESTS COLLECTED (counted as a failure); " ;;
    *) RESULT+="pytest $label: exit $rc, tests failed (see 'short test summary info' above); " ;;
    esac
    ((rc == 0)) || RC=$rc
}
if (($# == 0)); then
    run_pytest "-m compose" -m compose
    run_pytest "-m 'not compose'" -m "not compose"
else
    run_pytest "$*" "$@"
fi
exit "$RC"
