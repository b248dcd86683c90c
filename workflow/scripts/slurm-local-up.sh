#!/usr/bin/env bash
# Start a Slurm cluster on this one machine, from Debian's slurm-wlm and munge: munged, slurmctld and one
# slurmd per emulated node (all on this host, distinct ports), accounting off. For the tests, and to try
# `snakemake --profile workflow/profiles/slurm` without a cluster. Stop it with slurm-local-down.sh.
set -euo pipefail

NODES=2
CPUS=$(( $(nproc) > 4 ? $(nproc) : 4 ))  # the default pipeline's 4-rank runs fit on one node
INSTALL=1
STATE=${SYLVIE_SLURM_DIR:-/var/tmp/sylvie-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by sylvie's workflow/scripts/slurm-local-up.sh"

usage() {
    cat <<USAGE
usage: $0 [--nodes N] [--cpus-per-node C] [--no-install]

Start a single-machine Slurm (as root): munged, slurmctld and N slurmd daemons named sylvie1..sylvieN,
each offering C CPUs (default: this machine's count, at least 4, so that the default pipeline's 4-rank
runs fit on one node; N nodes oversubscribe the machine) and its memory, in one partition "local".
Accounting is off (use squeue, not sacct). Installs Debian's slurm-wlm and munge with apt-get when they
are missing (unless --no-install).

Writes $CONF (refuses to replace one it did not write) and keeps state and logs in
$STATE (SYLVIE_SLURM_DIR). Waits at most 60 s for the nodes to come up.

Exit status: 0 up; 1 failed; 2 bad usage or not root; 3 packages missing and not installable.
USAGE
}

die() { echo "slurm-local-up: $1" >&2; exit "${2:-1}"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) NODES=${2:?--nodes needs a number}; shift 2 ;;
        --cpus-per-node) CPUS=${2:?--cpus-per-node needs a number}; shift 2 ;;
        --no-install) INSTALL=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
[[ "$NODES" =~ ^[1-9][0-9]?$ ]] || die "--nodes must be a number from 1 to 99, got '$NODES'" 2
[[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || die "--cpus-per-node must be a positive number, got '$CPUS'" 2
[ "$(id -u)" = 0 ] || die "must run as root: it starts munged, slurmctld and slurmd and writes $CONF" 2

have_packages() { command -v slurmctld && command -v slurmd && command -v munged && command -v sbatch; } >/dev/null
if ! have_packages; then
    [ "$INSTALL" = 1 ] || die "slurm-wlm and munge are not installed (apt-get install slurm-wlm munge)" 3
    echo "slurm-local-up: installing slurm-wlm and munge with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -q slurm-wlm munge || { apt-get update -q && apt-get install -y -q slurm-wlm munge; }; } \
        > "/tmp/slurm-local-apt.log" 2>&1 || die "apt-get could not install slurm-wlm and munge; see /tmp/slurm-local-apt.log" 3
    have_packages || die "slurm-wlm and munge installed, but slurmctld/slurmd/munged/sbatch are not on PATH" 3
fi

if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    die "$CONF exists and was not written by this script; refusing to replace it (move it away first)" 1
fi
# A cluster this script started before is stopped first, so the new settings apply.
if [ -e "$CONF" ]; then "$(dirname "$0")/slurm-local-down.sh" >/dev/null; fi

mkdir -p "$STATE/ctld" "$STATE/spool" "$STATE/log"

# munge: the authentication every Slurm daemon and command uses.
if ! (munge -n | unmunge) >/dev/null 2>&1; then
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile /etc/munge/munge.key 2>/dev/null || create-munge-key -f >/dev/null
    fi
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
    chmod 0400 /etc/munge/munge.key
    runuser -u munge -- /usr/sbin/munged
    touch "$STATE/munged.started"
    for _ in $(seq 50); do (munge -n | unmunge) >/dev/null 2>&1 && break; sleep 0.1; done
    (munge -n | unmunge) >/dev/null 2>&1 || die "munged did not start; see /var/log/munge/munged.log"
fi

HOST=$(hostname -s)
MEM_MB=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
LAST_PORT=$((17000 + NODES))
mkdir -p "$(dirname "$CONF")"
cat > "$CONF.tmp" <<CONFIG
$MARK
# A single-machine cluster: $NODES emulated nodes on $HOST. Remove it with slurm-local-down.sh.
ClusterName=sylvie-local
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# the nodes offer what this file says, not what the hardware has (they share one machine)
SlurmdParameters=config_overrides
ReturnToService=2
# finished jobs stay visible to squeue/scontrol for 5 minutes: Snakemake's squeue status check needs that
MinJobAge=300
MpiDefault=none
KillWait=5
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=sylvie[1-$NODES] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=[17001-$LAST_PORT] CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONFIG
mv "$CONF.tmp" "$CONF"

slurmctld || die "slurmctld did not start; see $STATE/log/slurmctld.log"
for i in $(seq "$NODES"); do
    slurmd -N "sylvie$i" || die "slurmd for node sylvie$i did not start; see $STATE/log/slurmd-sylvie$i.log"
done

for _ in $(seq 120); do
    idle=$(sinfo -h -N -o '%t' 2>/dev/null | grep -c '^idle' || true)
    [ "$idle" = "$NODES" ] && break
    sleep 0.5
done
[ "$idle" = "$NODES" ] || { sinfo -N >&2 || true; die "only $idle of $NODES nodes are idle after 60 s; see $STATE/log"; }
echo "slurm-local-up: $NODES nodes (sylvie1..sylvie$NODES, $CPUS CPUs each) in partition 'local' on $HOST; state in $STATE"
sinfo
