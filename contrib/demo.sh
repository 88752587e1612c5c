#!/usr/bin/env bash
# THE main command (README): install everything, start the local dev Slurm cluster, submit
# a small GPU workload and show it the way slurmsched sees it.
#
#   contrib/demo.sh
#
# On a fresh Debian 12 machine as root. Steps: system packages and .venv
# (contrib/setup.sh), the dev Slurm cluster (contrib/dev-cluster/up.sh, embedded default:
# 4 nodes, 16 x a100 + 8 x v100, accounting in a private MariaDB), a sample workload of
# GPU jobs named demo-* (jobs of an earlier run are cancelled first; a few pend because
# the GPUs are full), then `slurmsched queue`: the gateway's view of jobs, SiteFactor and
# GPU use. Then slurmsched at work (bench/live_replay.py --generated, a few minutes): the
# sample jobs are cancelled and a short generated workload (heavy-tailed run times,
# resubmitting users, mixed GPU sizes, over-asked limits; time compressed) runs twice on
# the same cluster, on stock Slurm and with `slurmsched run` + job_submit.lua; it shows
# what slurmsched changed (SiteFactor updates, sprio, `slurmsched explain` of one job) and
# what it gained (avg JCT and waits of both runs). The daemon's config, database and log
# stay in .state/demo (`slurmsched --config .state/demo/slurmsched.toml status`).
# The cluster is left running; `contrib/dev-cluster/down.sh` stops it.
# Honours SLURMSCHED_DEV_STATE / SLURMSCHED_DEV_PORT (which dev cluster to use).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
LOG_TAG=demo
# shellcheck source=contrib/dev-cluster/lib.sh
source contrib/dev-cluster/lib.sh
PREFIX=demo-  # contrib/test.sh cancels jobs with this prefix before testing

step() { printf '\n==> [demo.sh] %s\n' "$*"; }

# submit NAME SBATCH-ARGS...: one sleeping GPU job named $PREFIX$NAME; prints its id.
submit() {
    local name=$1
    shift
    sbatch --parsable --output=/dev/null --job-name="$PREFIX$name" "$@"
}

submit_workload() {
    cancel_jobs_named "$PREFIX"
    # a100: 2 nodes x 8 on leaf1. The 2-node job fills them; the next two wait.
    submit train-llm -N2 --gres=gpu:a100:8 --switches=1 --time=30 --wrap 'sleep 600'
    submit finetune --gres=gpu:a100:4 --time=20 --wrap 'sleep 300'
    submit eval --gres=gpu:a100:1 --time=5 --wrap 'sleep 60'
    # v100: 2 nodes x 4 on leaf2. Three jobs fill them; the last two wait.
    submit resnet --gres=gpu:v100:4 --time=60 --wrap 'sleep 900'
    submit sweep-1 --gres=gpu:v100:2 --time=10 --wrap 'sleep 120'
    submit sweep-2 --gres=gpu:v100:2 --time=10 --wrap 'sleep 120'
    submit bert --gres=gpu:v100:4 --time=30 --wrap 'sleep 300'
    submit debug --partition=short --gres=gpu:v100:1 --time=2 --wrap 'sleep 30'
}

# Wait (up to 20 s) until Slurm has looked at every demo job: running, or pending
# with a reason such as Resources or Priority.
wait_scheduled() {
    local deadline=$((SECONDS + 20))
    while squeue -h -t PD -o '%j %r' | awk -v p="$PREFIX" 'index($1, p) == 1 && $2 == "None" {f = 1} END {exit !f}'; do
        ((SECONDS < deadline)) || return 0
        sleep 0.5
    done
}

step "system packages and .venv (contrib/setup.sh)"
bash contrib/setup.sh

step "dev Slurm cluster (contrib/dev-cluster/up.sh)"
# an assignment keeps up.sh's exit status for set -e (a bare eval "$(...)" would hide it)
cluster_env=$(bash contrib/dev-cluster/up.sh </dev/null)
eval "$cluster_env"

step "sample workload: 8 GPU jobs named $PREFIX*"
submit_workload >/dev/null
wait_scheduled

step "the gateway's view (slurmsched queue)"
.venv/bin/slurmsched queue

step "slurmsched at work: a generated workload on stock Slurm, then with the daemon (a few minutes)"
cancel_jobs_named "$PREFIX"
.venv/bin/python bench/live_replay.py --generated --history 300 --jobs 50 --speedup 60 --max-run 20 \
    --load 4 --interval 2 --state-dir "$REPO/.state/demo"

printf '\nThe cluster keeps running: source %s for Slurm commands; stop it with contrib/dev-cluster/down.sh\n' \
    "$SLURMSCHED_DEV_STATE/env.sh"
