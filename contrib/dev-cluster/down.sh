#!/usr/bin/env bash
# Stop the dev cluster that contrib/dev-cluster/up.sh started.
#
#   contrib/dev-cluster/down.sh [--purge]
#
# Stops only this instance's daemons, found by their pid files under $STATE/run and
# checked against /proc/PID/cmdline and /proc/PID/environ (SLURMSCHED_DEV_STATE=$STATE),
# then the job processes they leave behind: slurmstepd of this instance and processes
# of jobs whose environment has SLURM_CONF=$STATE/etc/slurm.conf. Job and accounting
# state is kept for the next up.sh; --purge removes the whole state directory.
# Honours SLURMSCHED_DEV_STATE like up.sh.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=contrib/dev-cluster/lib.sh
source "$HERE/lib.sh"

PURGE=0
for arg in "$@"; do
    case $arg in
    --purge) PURGE=1 ;;
    -h | --help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) die "unknown argument '$arg' (usage: down.sh [--purge])" ;;
    esac
done
[[ $EUID -eq 0 ]] || die "must run as root"
[[ $STATE == /* ]] || die "SLURMSCHED_DEV_STATE must be an absolute path, got '$STATE'"

# ancestors: this script's own process chain, never to be killed.
ancestors() {
    local pid=$$ stat
    while ((pid > 1)); do
        echo "$pid"
        stat=$(<"/proc/$pid/stat") || return 0
        stat=${stat##*) }
        pid=$(cut -d' ' -f2 <<<"$stat")
    done
}

# job_pids: leftover job processes of this instance.
job_pids() {
    local d pid comm keep
    keep=" $(ancestors | tr '\n' ' ') "
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        [[ $keep == *" $pid "* ]] && continue
        comm=$(cat 2>/dev/null <"$d/comm") || continue
        if [[ $comm == slurmstepd ]] && proc_has_env "$pid" "SLURMSCHED_DEV_STATE=$STATE"; then
            echo "$pid"
        elif proc_has_env "$pid" "SLURM_CONF=$CONF" &&
            tr '\0' '\n' 2>/dev/null <"$d/environ" | grep -q '^SLURM_JOB_ID='; then
            echo "$pid"
        fi
    done
}

# stop PID...: SIGTERM, wait up to 20 s, then SIGKILL.
stop() {
    local pid deadline=$((SECONDS + 20)) alive
    (($#)) || return 0
    kill -TERM "$@" 2>/dev/null || true
    while :; do
        alive=()
        for pid in "$@"; do
            [[ -d /proc/$pid ]] && [[ $(cut -d' ' -f3 <"/proc/$pid/stat" 2>/dev/null) != Z ]] && alive+=("$pid")
        done
        ((${#alive[@]})) || return 0
        if ((SECONDS >= deadline)); then
            log "killing ${alive[*]} (did not stop on SIGTERM)"
            kill -KILL "${alive[@]}" 2>/dev/null || true
            return 0
        fi
        sleep 0.2
    done
}

# stop_daemons NAME: stop this instance's daemons with executable NAME.
stop_daemons() {
    local pidfile name pid pids=()
    while read -r pidfile name; do
        [[ $name == "$1" ]] || continue
        if pid=$(pid_of "$pidfile" "$name"); then
            pids+=("$pid")
        fi
        rm -f "$pidfile"
    done < <(daemon_table)
    ((${#pids[@]})) && log "stopping $1 (${pids[*]})"
    stop "${pids[@]}"
}

if [[ -d $STATE ]]; then
    stop_daemons slurmd
    mapfile -t jobs < <(job_pids)
    ((${#jobs[@]})) && log "stopping ${#jobs[@]} leftover job processes"
    stop "${jobs[@]}"
    for daemon in slurmctld slurmdbd mariadbd munged; do
        stop_daemons "$daemon"
    done
    log "stopped $STATE"
else
    log "$STATE does not exist; nothing to stop"
fi
if ((PURGE)) && [[ -d $STATE ]]; then
    [[ -e $STATE/port || -e $STATE/up.lock ]] || die "$STATE does not look like an up.sh state directory; not removing it"
    rm -rf "$STATE"
    log "removed $STATE"
fi
