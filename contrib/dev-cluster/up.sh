#!/usr/bin/env bash
# Start slurmsched's dev cluster: a real Slurm 22.05 cluster of host processes.
#
#   contrib/dev-cluster/up.sh            # prints `export SLURM_CONF=...` lines
#   eval "$(contrib/dev-cluster/up.sh)"  # point this shell's Slurm clients at it
#
# On a Debian 12 host, as root: installs the Debian packages it needs (only those that are
# missing), renders the config from contrib/cluster/cluster.toml into $STATE/etc and starts,
# each only if not already running, a private munged, a private MariaDB, slurmdbd,
# slurmctld and one slurmd per node (fake GPUs are character devices under $STATE/dev).
# It waits until every node is up, then prints the environment for clients and writes it
# to $STATE/env.sh. Running it again while the cluster is up is a fast no-op that prints
# the environment again (and applies config changes with `scontrol reconfigure`).
# The host's /etc/slurm and /etc/munge are never touched.
#
# Environment:
#   SLURMSCHED_DEV_STATE    state directory (default /var/lib/slurmsched-dev)
#   SLURMSCHED_DEV_PORT     port base (default 16817): slurmctld PORT, slurmdbd PORT+1,
#                           MariaDB PORT+2, slurmd PORT+11 ...
#   SLURMSCHED_DEV_TIMEOUT  seconds to wait for each daemon and for the nodes (default 90)
#   SLURMSCHED_DEV_JOB_SUBMIT_LUA  job_submit.lua to install
#                           (default contrib/slurm.conf.d/job_submit.lua)
#
# If that job_submit.lua exists it is copied beside slurm.conf and JobSubmitPlugins=lua
# is enabled (a changed or removed file is applied with `scontrol reconfigure`).
# slurmctld runs with SLURMSCHED_DEV_STATE and SLURM_CONF in its environment, so the
# script can find files of this instance with os.getenv().
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=contrib/dev-cluster/lib.sh
source "$HERE/lib.sh"
export PATH="$PATH:/usr/sbin:/sbin"
TIMEOUT=${SLURMSCHED_DEV_TIMEOUT:-90}
LUA=${SLURMSCHED_DEV_JOB_SUBMIT_LUA:-$REPO/contrib/slurm.conf.d/job_submit.lua}

[[ $EUID -eq 0 ]] || die "must run as root (it starts slurmd and makes device files)"
[[ $STATE == /* ]] || die "SLURMSCHED_DEV_STATE must be an absolute path, got '$STATE'"
[[ $PORT =~ ^[0-9]+$ ]] && ((PORT >= 1024 && PORT <= 65000)) ||
    die "SLURMSCHED_DEV_PORT must be a port number between 1024 and 65000, got '$PORT'"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "SLURMSCHED_DEV_TIMEOUT must be whole seconds, got '$TIMEOUT'"

# Every daemon gets these, so down.sh can tell our processes from anyone else's.
DAEMON_ENV=(env "SLURM_CONF=$CONF" "SLURMSCHED_DEV_STATE=$STATE")

install_packages() {
    local extra=()
    command -v python3 >/dev/null || extra+=(python3)
    apt_install_missing "${DEV_CLUSTER_PACKAGES[@]}" "${extra[@]}"
}

# wait_for WHAT LOGFILE COMMAND...: retry COMMAND until it succeeds or TIMEOUT passes.
wait_for() {
    local what=$1 logfile=$2 deadline=$((SECONDS + TIMEOUT))
    shift 2
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "$what did not come up within ${TIMEOUT}s; see $logfile"
        sleep 0.2
    done
}

any_daemon_running() {
    local pidfile name
    while read -r pidfile name; do
        pid_of "$pidfile" "$name" >/dev/null && return 0
    done < <(daemon_table)
    return 1
}

# check_ports_free: with none of this instance's daemons running, die naming every port
# of the instance (slurmctld, slurmdbd, MariaDB, each slurmd) that something on this host
# already accepts connections on: another instance whose range overlaps, most likely.
# Otherwise that shows only as one daemon's bind error, deep in its log.
check_ports_free() {
    local ports=("$PORT" $((PORT + 1)) $((PORT + 2))) taken=() port
    while read -r _ port _; do ports+=("$port"); done <"$ETC/nodes.txt"
    for port in "${ports[@]}"; do
        # A connect through bash's /dev/tcp: no extra tool, and no shell command string.
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then taken+=("$port"); fi
    done
    ((${#taken[@]} == 0)) ||
        die "port(s) ${taken[*]} already in use; this instance needs ${ports[*]} (SLURMSCHED_DEV_PORT=$PORT):" \
            "pick a base whose range is free, or stop the other instance with down.sh"
}

# Render the config into a scratch dir and move changed files into $ETC one by one
# (rename is atomic, so clients never see a half-written file). Sets CONFIG_CHANGED.
# Only the rendered files and job_submit.lua are managed here.
render_config() {
    local tmp f args=(--mode host --state-dir "$STATE" --port-base "$PORT")
    tmp=$(mktemp -d "$STATE/etc.new.XXXXXX")
    if [[ -f $LUA ]]; then
        install -m 644 "$LUA" "$tmp/job_submit.lua"
        args+=(--job-submit-lua)
    fi
    python3 "$REPO/contrib/cluster/render.py" "${args[@]}" --out "$tmp"
    mkdir -p "$ETC"
    chmod 755 "$ETC"
    CONFIG_CHANGED=0
    # Other files in $ETC (such as the cache job_submit.lua reads) are not ours to remove.
    if [[ ! -e $tmp/job_submit.lua && -e $ETC/job_submit.lua ]]; then
        rm -f "$ETC/job_submit.lua"
        CONFIG_CHANGED=1
    fi
    for f in "$tmp"/*; do
        if ! cmp -s "$f" "$ETC/${f##*/}"; then
            mv -f "$f" "$ETC/${f##*/}"
            CONFIG_CHANGED=1
        fi
    done
    rm -rf "$tmp"
}

start_munge() {
    local key="$STATE/munge/munge.key"
    if [[ ! -s $key ]]; then
        log "generating a munge key in $key"
        mungekey --create --keyfile="$key" --force
    fi
    chmod 600 "$key"
    pid_of "$STATE/run/munged.pid" munged >/dev/null && return 0
    log "starting munged"
    rm -f "$STATE/munge/munge.socket.2" "$STATE/munge/munge.socket.2.lock"
    "${DAEMON_ENV[@]}" munged --force --key-file="$key" --socket="$STATE/munge/munge.socket.2" \
        --pid-file="$STATE/run/munged.pid" --log-file="$STATE/log/munged.log" \
        --seed-file="$STATE/munge/munged.seed" 9>&- ||
        die "munged failed to start; see $STATE/log/munged.log"
    wait_for munged "$STATE/log/munged.log" munge --socket="$STATE/munge/munge.socket.2" -n
}

start_mariadb() {
    local data="$STATE/mysql" sock="$STATE/run/mysqld.sock"
    if [[ ! -d $data/mysql ]]; then
        log "initialising MariaDB in $data"
        rm -rf "$data" "$STATE/registered"
        mariadb-install-db --no-defaults --datadir="$data" --user=root \
            --auth-root-authentication-method=normal --skip-test-db \
            >"$STATE/log/mariadb-install.log" 2>&1 ||
            die "mariadb-install-db failed; see $STATE/log/mariadb-install.log"
    fi
    pid_of "$STATE/run/mariadb.pid" mariadbd >/dev/null && return 0
    log "starting MariaDB on 127.0.0.1:$((PORT + 2))"
    setsid "${DAEMON_ENV[@]}" mariadbd --no-defaults --datadir="$data" --socket="$sock" \
        --port=$((PORT + 2)) --bind-address=127.0.0.1 --skip-name-resolve --user=root \
        --pid-file="$STATE/run/mariadb.pid" --log-error="$STATE/log/mariadb.log" \
        --innodb-buffer-pool-size=64M --max-connections=100 \
        </dev/null >>"$STATE/log/mariadb.log" 2>&1 9>&- &
    wait_for MariaDB "$STATE/log/mariadb.log" mariadb-admin --no-defaults --socket="$sock" -uroot ping
}

# Starts slurmdbd and registers cluster and user root once per database
# ($STATE/registered marks that it was done; each sacctmgr call costs ~0.3 s).
start_slurmdbd() {
    local cluster
    if pid_of "$STATE/run/slurmdbd.pid" slurmdbd >/dev/null && [[ -e $STATE/registered ]]; then
        return 0
    fi
    if ! pid_of "$STATE/run/slurmdbd.pid" slurmdbd >/dev/null; then
        log "starting slurmdbd on port $((PORT + 1))"
        "${DAEMON_ENV[@]}" slurmdbd 9>&- || die "slurmdbd failed to start; see $STATE/log/slurmdbd.log"
    fi
    wait_for slurmdbd "$STATE/log/slurmdbd.log" sacctmgr -n -P list cluster
    cluster=$(awk -F= '$1 == "ClusterName" {print $2}' "$CONF")
    if ! sacctmgr -n -P list cluster format=cluster | grep -qxF "$cluster"; then
        log "registering cluster $cluster with slurmdbd"
        sacctmgr -i add cluster "$cluster" >/dev/null
    fi
    if ! sacctmgr -n -P list user root format=user | grep -qx root; then
        sacctmgr -i add user root account=root >/dev/null
    fi
    touch "$STATE/registered"
}

start_slurmctld() {
    if ! pid_of "$STATE/run/slurmctld.pid" slurmctld >/dev/null; then
        log "starting slurmctld on port $PORT"
        "${DAEMON_ENV[@]}" slurmctld -f "$CONF" 9>&- || die "slurmctld failed to start; see $STATE/log/slurmctld.log"
    elif ((CONFIG_CHANGED)); then
        log "config changed: scontrol reconfigure"
        scontrol reconfigure || die "scontrol reconfigure failed; see $STATE/log/slurmctld.log"
    fi
    wait_for slurmctld "$STATE/log/slurmctld.log" scontrol ping
}

start_slurmds() {
    local name port gpu_type count i dev
    while read -r name port gpu_type count; do
        dev="$STATE/dev/$name"
        mkdir -p "$dev" "$STATE/spool/$name"
        for ((i = 0; i < count; i++)); do
            [[ -c $dev/nvidia$i ]] || { rm -f "$dev/nvidia$i"; mknod -m 666 "$dev/nvidia$i" c 1 3; }
        done
        pid_of "$STATE/run/slurmd-$name.pid" slurmd >/dev/null && continue
        log "starting slurmd $name ($gpu_type) on port $port"
        "${DAEMON_ENV[@]}" slurmd -f "$CONF" -N "$name" 9>&- ||
            die "slurmd $name failed to start; see $STATE/log/slurmd-$name.log"
    done <"$ETC/nodes.txt"
}

# All nodes answer and are usable: idle, mixed, allocated, completing or planned (idle,
# held for a pending job by the backfill scheduler), with no flag such as * (not
# responding) or ~ (powered down).
nodes_up() {
    local states
    states=$(sinfo -h -N -o '%N %t' | sort -u) || return 1
    [[ -n $states ]] || return 1
    ! grep -Evq ' (idle|mix|alloc|comp|plnd)$' <<<"$states"
}

wait_for_nodes() {
    local deadline=$((SECONDS + TIMEOUT))
    until nodes_up; do
        if ((SECONDS >= deadline)); then
            sinfo -N -o '%N %t %E' >&2 || true
            die "nodes not up within ${TIMEOUT}s; see $STATE/log/slurmctld.log and $STATE/log/slurmd-<node>.log"
        fi
        sleep 0.2
    done
}

print_env() {
    {
        echo "export SLURM_CONF=$CONF"
        echo "export SLURMSCHED_DEV_STATE=$STATE"
        echo "export SLURMSCHED_DEV_PORT=$PORT"
    } >"$STATE/env.sh.tmp"
    mv -f "$STATE/env.sh.tmp" "$STATE/env.sh"
    cat "$STATE/env.sh"
}

main() {
    install_packages
    mkdir -p "$STATE"
    chmod 755 "$STATE"
    exec 9>"$STATE/up.lock"
    flock -w "$TIMEOUT" 9 || die "another up.sh holds $STATE/up.lock"
    if [[ -f $STATE/port ]] && [[ $(cat "$STATE/port") != "$PORT" ]] && any_daemon_running; then
        die "$STATE is running with port base $(cat "$STATE/port"), not $PORT; run down.sh first"
    fi
    echo "$PORT" >"$STATE/port"
    mkdir -p "$STATE"/{run,log,munge,ctld,spool,dev}
    chmod 755 "$STATE"/{run,log,munge,dev}
    export SLURM_CONF=$CONF
    render_config
    any_daemon_running || check_ports_free
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurmctld
    start_slurmds
    wait_for_nodes
    log "up: $(wc -l <"$ETC/nodes.txt") nodes, state in $STATE"
    print_env
}

main "$@"
