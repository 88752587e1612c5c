# Shared by up.sh and down.sh (sourced, not run). Needs STATE set.
#
# Every daemon of an instance is started with SLURMSCHED_DEV_STATE=$STATE in its
# environment, so "is this pid ours?" is answered by its executable name and that
# environment entry, never by a process name alone.

STATE=${SLURMSCHED_DEV_STATE:-/var/lib/slurmsched-dev}
PORT=${SLURMSCHED_DEV_PORT:-16817}
ETC="$STATE/etc"
CONF="$ETC/slurm.conf"

log() { echo "dev-cluster: $*" >&2; }
die() { echo "dev-cluster: error: $*" >&2; exit 1; }

# proc_has_env PID ENTRY: the process's initial environment contains ENTRY exactly.
proc_has_env() {
    [[ -r /proc/$1/environ ]] && tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | grep -qxF -- "$2"
}

# ours PID NAME: PID is alive, runs executable NAME and belongs to this state dir.
ours() {
    local pid=$1 name=$2 argv0
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/cmdline ]] || return 1
    argv0=$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | head -n1) || return 1
    [[ ${argv0##*/} == "$name" ]] || return 1
    proc_has_env "$pid" "SLURMSCHED_DEV_STATE=$STATE"
}

# pid_of PIDFILE NAME: print the pid in PIDFILE if that process is ours and alive.
pid_of() {
    local pid
    [[ -s $1 ]] || return 1
    pid=$(tr -dc '0-9' <"$1")
    ours "$pid" "$2" && echo "$pid"
}

# daemon_table: "pidfile executable" for each daemon of this instance, in start order.
daemon_table() {
    echo "$STATE/run/munged.pid munged"
    echo "$STATE/run/mariadb.pid mariadbd"
    echo "$STATE/run/slurmdbd.pid slurmdbd"
    echo "$STATE/run/slurmctld.pid slurmctld"
    local f
    for f in "$STATE"/run/slurmd-*.pid; do
        [[ -e $f ]] && echo "$f slurmd"
    done
    return 0
}
