#!/usr/bin/env bash
# Stop the single-machine Slurm that slurm-local-up.sh started: cancel its jobs, stop slurmd, slurmctld and
# (if that script started it) munged, and remove its slurm.conf and state. Safe to run twice.
set -uo pipefail

STATE=${SYLVIE_SLURM_DIR:-/var/tmp/sylvie-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by sylvie's workflow/scripts/slurm-local-up.sh"

case "${1:-}" in
    -h|--help) echo "usage: $0   (as root; stops the cluster of slurm-local-up.sh, state in $STATE)"; exit 0 ;;
    "") ;;
    *) echo "usage: $0" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "slurm-local-down: must run as root" >&2; exit 2; }
if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    echo "slurm-local-down: $CONF was not written by slurm-local-up.sh; leaving this Slurm alone" >&2
    exit 1
fi

# stop_pidfile FILE: SIGTERM the daemon in FILE, wait up to 10 s, then SIGKILL.
stop_pidfile() {
    local pid
    [ -s "$1" ] || return 0
    pid=$(cat "$1")
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
}

if [ -e "$CONF" ]; then
    timeout -k 5 20 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    for f in "$STATE"/slurmd-*.pid; do stop_pidfile "$f"; done
    stop_pidfile "$STATE/slurmctld.pid"
    pkill -9 -x slurmstepd 2>/dev/null || true
    rm -f "$CONF"
fi
if [ -e "$STATE/munged.started" ]; then
    stop_pidfile /run/munge/munged.pid
fi
rm -rf "$STATE"
echo "slurm-local-down: stopped"
