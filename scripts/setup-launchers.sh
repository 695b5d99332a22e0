#!/usr/bin/env bash
# The launchers `hangtrace cluster` is tested through for real (tests/live/test_launchers.py):
# a one-node Slurm (slurm-wlm with munge), OpenSSH's server and pdsh, from Debian's packages.
# Installs them only; nothing is started or enabled here (the tests start their own daemons,
# as root, on loopback, and stop them). Skipped with a message when not root or without apt;
# the tests then skip with the reason. Safe to run again.
set -euo pipefail
want=()
command -v slurmctld >/dev/null 2>&1 || want+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || want+=(slurmd)
command -v srun >/dev/null 2>&1 || want+=(slurm-client)
command -v munged >/dev/null 2>&1 || want+=(munge)
[ -x /usr/sbin/sshd ] || want+=(openssh-server)
command -v ssh >/dev/null 2>&1 || want+=(openssh-client)
command -v pdsh >/dev/null 2>&1 || want+=(pdsh)
[ ${#want[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-launchers: not root or no apt-get: please install ${want[*]}" >&2
    exit 1
fi
echo "setup-launchers: installing ${want[*]}" >&2
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" \
    >/dev/null
