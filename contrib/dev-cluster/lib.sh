# Shared by the contrib scripts (sourced, not run): instance paths, process checks, apt.
#
# Every daemon of an instance is started with SLURMSCHED_DEV_STATE=$STATE in its
# environment, so "is this pid ours?" is answered by its executable name and that
# environment entry, never by a process name alone.

STATE=${SLURMSCHED_DEV_STATE:-/var/lib/slurmsched-dev}
PORT=${SLURMSCHED_DEV_PORT:-16817}
ETC="$STATE/etc"
CONF="$ETC/slurm.conf"

# Debian packages the dev cluster runs on.
DEV_CLUSTER_PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server slurm-wlm-mysql-plugin)

LOG_TAG=${LOG_TAG:-dev-cluster}
log() { echo "$LOG_TAG: $*" >&2; }
die() { echo "$LOG_TAG: error: $*" >&2; exit 1; }

# apt_install_missing PKG...: apt-get install those of PKG that are not installed yet.
apt_install_missing() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    log "installing ${missing[*]} with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

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

# cancel_jobs_named PREFIX: scancel every job of the cluster at $SLURM_CONF whose name
# starts with PREFIX.
cancel_jobs_named() {
    local ids
    ids=$(squeue -h -o '%i %j' | awk -v p="$1" 'index($2, p) == 1 {print $1}' | tr '\n' ' ')
    [[ -n $ids ]] || return 0
    log "cancelling jobs named $1*: $ids"
    # shellcheck disable=SC2086 # one argument per job id
    scancel $ids
}
