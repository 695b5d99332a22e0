"""The NCCL RAS probe talks to a target in its own network namespace inside that namespace
(issue 46, item 2).

A target in a network namespace of its own (a container) listens on 127.0.0.1:PORT there and
sets ``NCCL_RAS_ADDR=127.0.0.1:PORT``; on the host, another service listens on the same
127.0.0.1:PORT and counts every connection. The probe must reach the target's listener and
never the host's: "only an address a traced process listens on" holds across namespaces.
Needs root (a network namespace)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from typing import Iterator, List

import pytest

from tracer.record.probes.nccl_ras import nccl_ras_probe

pytestmark = [pytest.mark.live,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace)"),
              pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("ip") is None,
                                 reason="needs unshare and ip")]

ANSWER = json.dumps({"nccl_version": "in-the-target-namespace", "communicators": []})

# A RAS server as NCCL runs it (protocol 2), in the namespace it was started in.
SERVER = r"""
import socket, sys
port, answer = int(sys.argv[1]), sys.argv[2].encode()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(4)
print("READY", flush=True)
while True:
    c, _ = s.accept()
    f = c.makefile("rb")
    for line in f:
        cmd = line.decode().strip()
        if cmd.startswith("CLIENT PROTOCOL"):
            c.sendall(b"SERVER PROTOCOL 2\n")
        elif cmd.startswith(("TIMEOUT", "SET FORMAT")):
            c.sendall(b"OK\n")
        elif cmd.endswith("STATUS"):
            c.sendall(answer); break
    f.close(); c.shutdown(socket.SHUT_RDWR); c.close()
"""


class HostListener:
    """A service of the host on 127.0.0.1: every connection it accepts is counted, with what
    the client sent first."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.got: List[bytes] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            c.settimeout(1.0)
            try:
                self.got.append(c.recv(100))
                c.sendall(b"SERVER PROTOCOL 2\nOK\nOK\nTHE HOST'S BANNER\n")
            except OSError:
                self.got.append(b"")
            c.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def host() -> Iterator[HostListener]:
    h = HostListener()
    try:
        yield h
    finally:
        h.close()


def _in_own_netns(port: int) -> subprocess.Popen:
    env = dict(os.environ, NCCL_RAS_ADDR=f"127.0.0.1:{port}")
    p = subprocess.Popen(["unshare", "--net", "sh", "-c",
                          'ip link set lo up && exec "$0" -c "$1" "$2" "$3"',
                          sys.executable, SERVER, str(port), ANSWER],
                         env=env, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "READY"
    return p


def _stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait(timeout=10)


def test_the_probe_asks_the_target_s_namespace_never_the_host_s(host: HostListener) -> None:
    p = _in_own_netns(host.port)
    ours = os.readlink("/proc/thread-self/ns/net")
    try:
        assert os.readlink(f"/proc/{p.pid}/ns/net") != ours
        events = nccl_ras_probe([p.pid])
    finally:
        _stop(p)
    assert os.readlink("/proc/thread-self/ns/net") == ours      # only the helper thread moved
    assert not [t for t in threading.enumerate() if t.name == "hangtrace-netns"]
    time.sleep(0.2)                     # a connection the host accepted is counted by now
    assert host.got == [], f"the host's 127.0.0.1:{host.port} was reached: {host.got}"
    [e] = events
    assert (e.pid, e.host, e.port, e.error) == (p.pid, "127.0.0.1", host.port, "")
    assert json.loads(e.text)["nccl_version"] == "in-the-target-namespace"


def test_two_namespaces_on_one_address_are_each_asked(host: HostListener) -> None:
    """Two containers whose RAS listens on the same 127.0.0.1:PORT are two services."""
    a, b = _in_own_netns(host.port), _in_own_netns(host.port)
    try:
        events = nccl_ras_probe([a.pid, b.pid])
    finally:
        _stop(a)
        _stop(b)
    assert host.got == []
    assert sorted(e.pid for e in events) == sorted((a.pid, b.pid))
    assert all(e.error == "" and "in-the-target-namespace" in e.text for e in events)

