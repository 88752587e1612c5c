#!/bin/bash
# Entrypoint of every compose-cluster container: `entrypoint.sh ROLE [ARGS...]`.
#
# Roles:
#   init        render the Slurm config from contrib/cluster/cluster.toml (bind-mounted at
#               /opt/cluster) with render.py --mode compose into the slurm-conf and dbd-conf volumes, and create
#               the munge key in the munge-key volume on first start; then exit.
#   mariadb     MariaDB for slurmdbd (data on a volume; user `slurm` for slurm_acct_db).
#   postgres    PostgreSQL for slurmsched (`postgres` profile; database/user `slurmsched`).
#   slurmdbd    slurmdbd in the foreground, once MariaDB answers.
#   slurmctld   slurmctld in the foreground (waits up to a minute for slurmdbd).
#   slurmd      slurmd for the container's host name, with fake GPU character devices.
#   daemon      `slurmsched db upgrade`, then `slurmsched run` (the daemon), once slurmctld answers.
# Anything else is run as a command after munge is up (e.g. `entrypoint.sh bash`).
set -euo pipefail

role=${1:-}
[ $# -gt 0 ] && shift

log() { echo "entrypoint[$role]: $*" >&2; }

wait_tcp() {  # wait_tcp HOST PORT [SECONDS]: until something accepts connections there
    local i
    for i in $(seq 1 "${3:-300}"); do
        # bounded: a SYN sent before the peer's network is up is lost and connect() would hang
        if timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null; then
            log "$1:$2 answers (after $SECONDS s)"; return 0
        fi
        sleep 1
    done
    log "gave up waiting for $1:$2"; return 1
}

start_munge() {  # copy the shared key (read-only volume) and start munged as user munge
    local i
    for i in $(seq 1 120); do [ -s /etc/munge-key/munge.key ] && break; sleep 1; done
    install -o munge -g munge -m 0400 /etc/munge-key/munge.key /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
    runuser -u munge -- /usr/sbin/munged
}

case "$role" in
init)
    out=$(mktemp -d)
    python3 /opt/cluster/render.py --mode compose --out "$out"
    for f in slurm.conf gres.conf topology.conf cgroup.conf slurmdbd.conf; do
        dest=/etc/slurm-conf/$f mode=0644
        [ "$f" = slurmdbd.conf ] && dest=/etc/dbd-conf/$f mode=0600
        cmp -s "$out/$f" "$dest" || install -m "$mode" "$out/$f" "$dest"
    done
    if [ ! -s /etc/munge-key/munge.key ]; then
        umask 077
        dd if=/dev/urandom of=/etc/munge-key/munge.key.tmp bs=1024 count=1 status=none
        mv /etc/munge-key/munge.key.tmp /etc/munge-key/munge.key
        log "created a new munge key"
    fi
    log "config rendered from cluster.toml"
    ;;
mariadb)
    install -d -o mysql -g mysql /run/mysqld
    chown mysql:mysql /var/lib/mysql
    [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null
    # Idempotent, run at every start: slurmdbd's user, reachable only on the compose network.
    cat > /run/mysqld/init.sql <<'SQL'
CREATE USER IF NOT EXISTS 'slurm'@'%';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'%';
SQL
    exec mariadbd --user=mysql --datadir=/var/lib/mysql --bind-address=0.0.0.0 --skip-name-resolve \
        --innodb-buffer-pool-size=256M --innodb-log-file-size=64M --init-file=/run/mysqld/init.sql
    ;;
postgres)
    bin=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
    data=/var/lib/postgresql/data
    install -d -o postgres -g postgres /run/postgresql "$data"
    if [ ! -s "$data/PG_VERSION" ]; then
        runuser -u postgres -- "$bin/initdb" -D "$data" --auth-local=trust --auth-host=trust >/dev/null
        echo "host all all 0.0.0.0/0 trust" >> "$data/pg_hba.conf"
        runuser -u postgres -- "$bin/pg_ctl" -D "$data" -o "-c listen_addresses=''" -w start >/dev/null
        runuser -u postgres -- psql -q -c "CREATE USER slurmsched" -c "CREATE DATABASE slurmsched OWNER slurmsched"
        runuser -u postgres -- "$bin/pg_ctl" -D "$data" -w stop >/dev/null
    fi
    exec runuser -u postgres -- "$bin/postgres" -D "$data" -c listen_addresses='*'
    ;;
slurmdbd)
    start_munge
    wait_tcp mariadb 3306
    exec slurmdbd -D "$@"
    ;;
slurmctld)
    start_munge
    install -d /var/spool/slurmctld /var/log/slurm
    wait_tcp slurmdbd 6819 60 || true  # slurmctld also starts (and catches up) without it
    # slurmctld registers the cluster with slurmdbd itself (root account and user included).
    exec slurmctld -D "$@"
    ;;
slurmd)
    start_munge
    install -d /var/spool/slurmd /var/log/slurm /dev/fakegpu
    # Fake GPUs: the character devices gres.conf names for this node (mknod needs privileged).
    spec=$(sed -n "s/^NodeName=$(hostname) .*File=\/dev\/fakegpu\/nvidia\[0-\([0-9]*\)\].*/\1/p" /etc/slurm/gres.conf)
    for i in $(seq 0 "${spec:?no gres.conf line for $(hostname)}"); do
        [ -e "/dev/fakegpu/nvidia$i" ] || mknod -m 666 "/dev/fakegpu/nvidia$i" c 1 3
    done
    wait_tcp slurmctld 6817 60 || true  # registers at once instead of after slurmd's back-off
    exec slurmd -D -N "$(hostname)" "$@"
    ;;
daemon)
    start_munge
    install -d "${SLURMSCHED_DAEMON_STATE_DIR:-/var/lib/slurmsched}"
    case "${SLURMSCHED_DB_URL:-}" in *@postgres/*) wait_tcp postgres 5432 ;; esac
    for _ in $(seq 1 120); do scontrol ping >/dev/null 2>&1 && break; sleep 1; done
    slurmsched db upgrade  # creates or migrates the history database (idempotent)
    exec slurmsched run "$@"
    ;;
*)
    start_munge
    exec "$role" "$@"
    ;;
esac
