"""Real launchers for the cluster tests (tests/live/test_launchers.py): OpenSSH's server and a
one-node Slurm (slurmctld, slurmd, munge), started by the tests as root on loopback only, each
with its own keys, configuration and state in a temporary folder, and stopped after.

- ``why_not(*programs)``: why these cannot be used here (not root, a program missing), or None.
- ``SshServer(tmp)``: sshd on 127.0.0.1 at a free port, accepting one key made here; the client
  side is a drop-in /etc/ssh/ssh_config.d/hangtrace-tests.conf for ``Host 127.0.0.1`` (port,
  key, its own known_hosts), so that a plain ``ssh 127.0.0.1`` (what ``cluster --via ssh`` and
  pdsh run) reaches it; the drop-in is removed on stop. ``env`` is what pdsh needs.
- ``Slurm(tmp)``: munged (reused when one already answers), slurmctld and slurmd from a
  slurm.conf of one node (this host at 127.0.0.1, free ports, linuxproc tracking, no
  accounting); ``env`` carries SLURM_CONF for srun/squeue; ``job_step(argv)`` starts a job step
  with ``srun`` and returns (job id, Popen).
- ``exclusive()``: a lock held across processes, so that two copies of the suite running at
  once do not share a drop-in or a port.
Every wait is bounded; a daemon that does not come up is a skip with its log, never a hang.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

DROP_IN = Path("/etc/ssh/ssh_config.d/hangtrace-tests.conf")
LOCK = "/tmp/hangtrace-launcher-tests.lock"


def why_not(*programs: str) -> Optional[str]:
    if os.geteuid() != 0:
        return "needs root (the daemons are started as root, on loopback)"
    missing = [p for p in programs if shutil.which(p) is None and not os.path.exists(p)]
    if missing:
        return (f"{', '.join(missing)} not installed (scripts/setup-launchers.sh installs "
                "slurm-wlm, munge, openssh-server and pdsh)")
    return None


@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    with open(LOCK, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, ok, timeout: float, log: Optional[Path] = None) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
    raise RuntimeError(f"{what} did not come up in {timeout:g} s\n{tail}")


def _stop(p: Optional[subprocess.Popen]) -> None:
    if p is None or p.poll() is not None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class SshServer:
    def __init__(self, tmp: Path) -> None:
        self.dir = tmp
        self.port = free_port()
        self.proc: Optional[subprocess.Popen] = None
        self.env: Dict[str, str] = dict(os.environ, PDSH_RCMD_TYPE="ssh")

    def start(self) -> "SshServer":
        d = self.dir
        for name in ("host_key", "id"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)],
                           check=True)
        (d / "authorized_keys").write_text('from="127.0.0.1" ' + (d / "id.pub").read_text())
        (d / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n"
            f"PidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n")
        host = (d / "host_key.pub").read_text().split()
        (d / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host[0]} {host[1]}\n")
        os.makedirs("/run/sshd", exist_ok=True)
        log = d / "sshd.log"
        self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")],
                                     stdout=subprocess.DEVNULL, stderr=open(log, "w"))
        DROP_IN.write_text(f"# hangtrace's tests (tests/launchers.py); removed after them\n"
                           f"Host 127.0.0.1\n    Port {self.port}\n    User root\n"
                           f"    IdentityFile {d}/id\n    IdentitiesOnly yes\n"
                           f"    UserKnownHostsFile {d}/known_hosts\n"
                           "    StrictHostKeyChecking yes\n")
        _wait("sshd", lambda: subprocess.run(
            ["ssh", "-o", "BatchMode=yes", "127.0.0.1", "true"], capture_output=True,
            timeout=20).returncode == 0, 30, log)
        return self

    def stop(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            DROP_IN.unlink()
        _stop(self.proc)


class Slurm:
    def __init__(self, tmp: Path) -> None:
        self.dir = tmp
        self.conf = tmp / "slurm.conf"
        self.env: Dict[str, str] = dict(os.environ, SLURM_CONF=str(self.conf))
        self.procs: List[subprocess.Popen] = []
        self.munged: Optional[int] = None

    def _munge_answers(self) -> bool:
        try:
            cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=5)
            return cred.returncode == 0 and subprocess.run(
                ["unmunge"], input=cred.stdout, capture_output=True, timeout=5).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    def _start_munge(self) -> None:
        if self._munge_answers():
            return                                  # one is running: reuse it, never stop it
        os.makedirs("/run/munge", exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True,
                       timeout=30)
        _wait("munged", self._munge_answers, 20)
        with contextlib.suppress(OSError, ValueError):
            self.munged = int(Path("/run/munge/munged.pid").read_text().split()[0])

    def start(self) -> "Slurm":
        self._start_munge()
        d = self.dir
        for sub in ("state", "spool"):
            (d / sub).mkdir()
        node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True,
                              timeout=30).stdout.splitlines()[0]
        host = node.split()[0].split("=", 1)[1]
        self.host = host
        self.conf.write_text("\n".join([
            "ClusterName=hangtrace-test", f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}",
            "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd.pid",
            f"SlurmctldLogFile={d}/slurmctld.log", f"SlurmdLogFile={d}/slurmd.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "MpiDefault=none",
            "ReturnToService=2", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=5",
            " ".join(w for w in node.split() if not w.startswith("UpTime=")) + " NodeAddr=127.0.0.1",
            f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP "
            "OverSubscribe=YES", ""]))
        for daemon in ("slurmctld", "slurmd"):
            self.procs.append(subprocess.Popen(
                [daemon, "-D", "-f", str(self.conf)], env=self.env, stdout=subprocess.DEVNULL,
                stderr=open(d / f"{daemon}.err", "w")))
        _wait("slurm's node", lambda: "idle" in subprocess.run(
            ["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True,
            timeout=10).stdout, 60, d / "slurmd.log")
        return self

    def job_step(self, argv: List[str], name: str) -> Tuple[str, subprocess.Popen]:
        """``srun`` a one-task job step; its job id once it runs."""
        p = subprocess.Popen(["srun", "-N1", "-n1", f"--job-name={name}"] + argv, env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        job: List[str] = []

        def running() -> bool:
            out = subprocess.run(["squeue", "-h", "-n", name, "-t", "R", "-o", "%i"],
                                 env=self.env, capture_output=True, text=True, timeout=10).stdout
            job[:] = out.split()
            return bool(job)
        _wait(f"job {name}", running, 60, self.dir / "slurmctld.log")
        return job[0], p

    def stop(self) -> None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(["scancel", "--full", "-u", "root"], env=self.env, timeout=10,
                           capture_output=True)
        for p in reversed(self.procs):
            _stop(p)
        if self.munged:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.munged, signal.SIGTERM)
