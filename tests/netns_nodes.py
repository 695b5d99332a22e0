"""Two "nodes" for live tests: two network namespaces made here, joined by a veth pair.

``NodePair()`` (a context manager) creates namespaces htA<tag> and htB<tag> and a veth pair
whose ends are created directly inside them (never in the machine's own namespace), with
192.0.2.1/24 in A and 192.0.2.2/24 in B and no other address: loopback stays down and IPv6 is
switched off before the link comes up (no link-local address either). Leaving the context, on
every exit path (an assertion, an exception, Ctrl-C), kills the processes started through
``start`` and deletes both namespaces, which destroys the veth pair with them. ``unusable()``
says why namespaces cannot be made here (not root, no ``ip``), or None.

``start(ns, argv, env)`` runs argv inside namespace ``ns`` (``ip netns exec``) in its own
session, stdin a pipe nobody writes, and returns once it printed ``READY <pid>``.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from typing import Dict, List, Optional

ADDR_A, ADDR_B = "192.0.2.1", "192.0.2.2"


def unusable() -> Optional[str]:
    if os.geteuid() != 0:
        return "ip netns needs root"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    return None


def _ip(*args: str) -> None:
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip()}")


class NodePair:
    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000}{int(time.monotonic() * 1000) % 1000}"
        self.a, self.b = f"htA{tag}", f"htB{tag}"
        self._veth = (f"htva{tag}"[:15], f"htvb{tag}"[:15])
        self._made: List[str] = []
        self._procs: List[subprocess.Popen] = []

    def __enter__(self) -> "NodePair":
        try:
            for ns in (self.a, self.b):
                _ip("netns", "add", ns)
                self._made.append(ns)
                _ip("netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1")
            va, vb = self._veth
            _ip("link", "add", va, "netns", self.a, "type", "veth", "peer", "name", vb,
                "netns", self.b)
            for ns, dev, addr in ((self.a, va, ADDR_A), (self.b, vb, ADDR_B)):
                _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
                _ip("-n", ns, "link", "set", dev, "up")
        except BaseException:
            self.close()
            raise
        return self

    def addresses(self, ns: str) -> List[str]:
        p = subprocess.run(["ip", "-n", ns, "-o", "addr"], capture_output=True, text=True,
                           timeout=30)
        return [line.split()[3] for line in p.stdout.splitlines() if len(line.split()) > 3]

    def start(self, ns: str, argv: List[str], env: Dict[str, str], cwd: str,
              timeout: float = 20.0) -> int:
        p = subprocess.Popen(["ip", "netns", "exec", ns, "env", *[f"{k}={v}" for k, v in
                                                                   env.items()], *argv],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True, cwd=cwd,
                             text=True)
        self._procs.append(p)
        deadline = time.monotonic() + timeout
        assert p.stdout is not None
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if line.startswith("READY "):
                return int(line.split()[1])
            if not line and p.poll() is not None:
                break
        raise RuntimeError(f"{argv} in {ns} not READY: {p.stderr.read() if p.stderr else ''}")

    def close(self) -> None:
        for p in self._procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)
            for f in (p.stdin, p.stdout, p.stderr):
                if f is not None:
                    f.close()
        self._procs.clear()
        for ns in self._made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._made.clear()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def gone(self) -> bool:
        """Neither namespace nor veth end is left on the machine."""
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                timeout=30).stdout
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                               timeout=30).stdout
        return not any(n in listed for n in (self.a, self.b)) and \
            not any(v in links for v in self._veth)
