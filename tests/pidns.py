"""Run a scenario inside a new pid namespace (``unshare --pid --fork --mount-proc``: what a
pod's sidecar with shareProcessNamespace, ``kubectl debug`` or ``docker exec`` gives), and
hangtrace inside it or outside it (attaching by the host pid).

Used by tests/live/test_pid_namespaces.py; run as a program, it is the namespace's first process:

    pidns.py attach SCENARIO [SCENARIO ARGS...] -- ATTACH ARGS...
        starts SCENARIO, runs ``hangtrace attach <its ns pid> ARGS`` inside, prints one JSON
        line {"pid": ns pid, "extra": READY extra, "rc":, "stdout":, "stderr":};
    pidns.py hold SCENARIO
        starts SCENARIO, prints ``READY <ns pid> <extra>``, waits until stdin closes.

Whatever happens, the namespace's processes die with its first process (the kernel kills a
pid namespace whose init exits), and ``Namespace.close`` kills that one.

Contract (as a module):
- ``attach_inside(scenario, args, timeout)`` -> (ns pid, READY extra, CompletedProcess).
- ``Namespace(scenario)``: the scenario held in a namespace; ``ns_pid``, ``host_pid`` (found
  through NSpid in the host's /proc), ``extra``; ``close()`` (idempotent; a context manager).
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), env.get("PYTHONPATH", "")])
    return env


def attach_inside(scenario: str, args: List[str], timeout: float,
                  scenario_args: Sequence[str] = ()
                  ) -> Tuple[int, str, subprocess.CompletedProcess]:
    """hangtrace attach run inside the namespace on SCENARIO's root (module doc)."""
    p = subprocess.run([*UNSHARE, sys.executable, str(HERE / "pidns.py"), "attach", scenario,
                        *scenario_args, "--", *args], capture_output=True, text=True,
                       timeout=timeout, env=_env(), start_new_session=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"namespace run failed (rc {p.returncode}): {p.stdout[-2000:]}{p.stderr[-3000:]}"
    got = json.loads(lines[-1])
    return got["pid"], got["extra"], subprocess.CompletedProcess(
        args, got["rc"], got["stdout"], got["stderr"])


def _nspid(pid: int) -> List[int]:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


def _descendants(root: int) -> List[int]:
    kids: dict = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, ()))
    return out


class Namespace:
    """SCENARIO held inside a new pid namespace (module doc)."""

    def __init__(self, scenario: str, ready_timeout: float = 30.0) -> None:
        self.proc = subprocess.Popen(
            [*UNSHARE, sys.executable, str(HERE / "pidns.py"), "hold", scenario],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_env(), start_new_session=True)
        try:
            line = self._ready_line(ready_timeout)
            fields = line.split()
            self.ns_pid, self.extra = int(fields[1]), " ".join(fields[2:])
            self.host_pid = self._host_pid()
        except BaseException:
            self.close()
            raise

    def _ready_line(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if line.startswith("READY "):
                    return line
                if not line:
                    break
        raise RuntimeError(f"no READY from the namespace: {self.proc.stderr.read()[-2000:]}"
                           if self.proc.poll() is not None else "no READY from the namespace")

    def _host_pid(self) -> int:
        """The host pid of the scenario's root: the descendant of unshare whose NSpid ends
        with the namespace pid, one level below the host."""
        for pid in _descendants(self.proc.pid):
            ns = _nspid(pid)
            if len(ns) == 2 and ns[1] == self.ns_pid:
                return pid
        raise RuntimeError(f"no host pid for namespace pid {self.ns_pid}")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=15)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)

    def __enter__(self) -> "Namespace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------ inside the namespace
def _inside(argv: List[str]) -> int:
    import scenarios
    mode, name = argv[0], argv[1]
    cut = argv.index("--") if "--" in argv else len(argv)
    sc = scenarios.start_scenario(name, *argv[2:cut])
    try:
        if mode == "hold":
            print(f"READY {sc.pid} {sc.extra}", flush=True)
            sys.stdin.read()
            return 0
        args = argv[cut + 1:]
        p = subprocess.run([sys.executable, "-m", "tracer", "attach", str(sc.pid), *args],
                           capture_output=True, text=True, timeout=120)
        print(json.dumps({"pid": sc.pid, "extra": sc.extra, "rc": p.returncode,
                          "stdout": p.stdout, "stderr": p.stderr}), flush=True)
        return 0
    finally:
        sc.stop(check=False)


if __name__ == "__main__":
    sys.exit(_inside(sys.argv[1:]))
