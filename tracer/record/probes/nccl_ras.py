"""Ask NCCL's RAS service what the job itself knows: which rank is behind, missing or dead.

Contract: ``nccl_ras_probe(pids, analyzer)`` is an ``EndProbe``. When a traced process listens
on NCCL's RAS port (``ras_addresses``), it connects to that address once (read only) and
returns one ``NcclRasStatus`` event with the raw answer, JSON, else text (``query``), so that
``analyze`` of the saved trace reaches the same verdict. Bounded and never fatal: every service
asked at once, all within ``SECONDS`` for the whole probe, ``MAX_BYTES`` each; trouble is the
event's ``error``; a stop (linux/cancel.py) ends it at once. It only connects to an address a
traced process listens on, from that process's network namespace (its listener found in its
namespace's tables, the socket made there: netns.socket_in_netns_of): a container's 127.0.0.1
is its own, never the host's.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ... import events as ev
from ...linux import cancel, procfs
from ...linux.intparse import parse_uint
from ...linux.netns import NetnsRefused, socket_in_netns_of
from ..probe_run import END_PROBES_S
from .socket_peers import socket_inodes

RAS_PORT = 28028
PROTOCOL = 2
MAX_BYTES = 4 << 20
LEG_TIMEOUT_S = 2          # what we ask the RAS collective to wait for each peer
# The whole probe, every service asked at once: the RAS collective's own wait for a peer and
# one second more, so that the end probes after it (stacks, logs) keep part of END_PROBES_S;
# a probe that took all of it left them not run.
SECONDS = LEG_TIMEOUT_S + 1.0
assert SECONDS < END_PROBES_S
MAX_SERVICES = 32          # asked; any more are named as not asked
MAX_LINE = 4096            # a reply line of the handshake


class RasError(Exception):
    pass


class FormatRefused(RasError):
    """The server does not know SET FORMAT (NCCL before 2.28): ask again in text."""


class RasService(NamedTuple):
    """A RAS service of the traced tree: ``host:port`` as ``pid`` listens on it, in its own
    network namespace (``netns``: the namespace's name in /proc/PID/ns/net)."""
    host: str
    port: int
    pid: int
    netns: str = ""


def _parse_addr(text: str) -> Optional[Tuple[str, int]]:
    """NCCL_RAS_ADDR "host:port" / "[v6]:port" / "port"; None when unreadable (a port of ASCII
    digits, 1 to 65535: intparse's, as for everything a target writes)."""
    text = text.strip()
    host, _, port = text.rpartition(":")
    number = parse_uint(port, 5)
    if number is None or not 0 < number < 65536:
        return None
    return (host.strip("[]") or "127.0.0.1"), number


Listening = Callable[[int], Optional[List[str]]]


def _tcp_listeners(pid: int, tables: procfs.SocketTables,
                   known: Optional[Listening]) -> List[Tuple[str, str]]:
    """(proto, local address) of the listening TCP sockets of ``pid``: as ``known`` says
    (the last look's ``ProcessInfo.listening``), else from its fds' links (no fdinfo; the
    namespace's table only for a process that holds a socket)."""
    seen = known(pid) if known is not None else None
    if seen is not None:
        pairs = [tuple(x.split(" ", 1)) for x in seen if " " in x]
        return sorted({(p, a) for p, a in pairs if p.startswith("tcp")})  # type: ignore
    inodes = socket_inodes(pid)
    if not inodes:
        return []
    table = tables.of(pid)
    return sorted({(e.proto, e.local) for e in (table.get(i) for i in inodes)
                   if e is not None and e.listening and e.local and e.proto.startswith("tcp")})


def _netns(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return f"pid {pid}"         # unreadable: its own, not another's (procfs.SocketTables)


def ras_addresses(pids: Sequence[int],
                  known: Optional[Listening] = None) -> List[RasService]:
    """The RAS services the traced tree runs, one per address and network namespace, sorted.
    The port is 28028 (``RAS_PORT``), or the port of ``NCCL_RAS_ADDR`` in the process's
    environment; a process whose environment says ``NCCL_RAS_ENABLE=0`` is skipped. Only a
    process that listens on TCP has its environment read; its listeners are those of its own
    network namespace. ``known(pid)``: its listening sockets as the recording's last look at
    it saw them (None: not known, read /proc)."""
    out: Dict[Tuple[str, int, str], RasService] = {}
    tables = procfs.SocketTables()
    for pid in pids:
        listening = _tcp_listeners(pid, tables, known)
        if not listening:
            continue
        env = procfs.read_environ_vars(pid, ("NCCL_RAS_ADDR", "NCCL_RAS_ENABLE"))
        if env.get("NCCL_RAS_ENABLE", "").strip() == "0":
            continue
        want = _parse_addr(env["NCCL_RAS_ADDR"]) if env.get("NCCL_RAS_ADDR") else None
        port = want[1] if want else RAS_PORT
        for proto, local in listening:
            addr = _parse_addr(local)
            if addr is None or addr[1] != port:
                continue
            host = addr[0]
            if host in ("0.0.0.0", "::", ""):
                host = "127.0.0.1" if proto == "tcp" else "::1"
            ns = _netns(pid)
            out.setdefault((host, port, ns), RasService(host, port, pid, ns))
    return sorted(out.values())


class Deadline(NamedTuple):
    """When a question must be done (``at``: time.monotonic()), given ``seconds`` in all."""
    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> "Deadline":
        return cls(time.monotonic() + seconds, seconds)


def _left(deadline: Deadline, what: str) -> float:
    cancel.check()              # a stop: the service's thread ends at its next step
    left = deadline.at - time.monotonic()
    if left <= 0:
        raise RasError(f"no {what} within the probe's {deadline.seconds:g} s")
    return left


def _read_line(sock: socket.socket, deadline: Deadline) -> str:
    buf = b""
    while not buf.endswith(b"\n") and len(buf) < MAX_LINE:
        sock.settimeout(_left(deadline, "complete reply line"))
        chunk = sock.recv(1)
        if not chunk:
            break
        buf += chunk
    return buf.decode("utf-8", "replace")


def _command(sock: socket.socket, line: str, deadline: Deadline) -> str:
    sock.settimeout(_left(deadline, "room to send"))
    sock.sendall(line.encode() + b"\n")
    return _read_line(sock, deadline).strip()


def _connect(host: str, port: int, deadline: Deadline, pid: Optional[int]) -> socket.socket:
    """A socket connected to ``host:port`` (an address literal), made in ``pid``'s network
    namespace (in hangtrace's own where ``pid`` is None)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = (socket.socket(family, socket.SOCK_STREAM) if pid is None
                else socket_in_netns_of(pid, family))
    except NetnsRefused as exc:
        raise RasError(str(exc)) from None
    try:
        sock.settimeout(min(1.0, _left(deadline, "connection")))
        sock.connect((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def query(host: str, port: int, *, fmt: str = "json", deadline_s: float = 8.0,
          deadline: Optional[Deadline] = None, pid: Optional[int] = None) -> str:
    """The server's VERBOSE STATUS answer in ``fmt`` ("json" or "text"); RasError on trouble.
    Asked from ``pid``'s network namespace where given; done by ``deadline``, else within
    ``deadline_s``, whatever the server does.
    Protocol (NVIDIA/nccl src/ras/client.cc, protocol 2, NCCL 2.24+): the client sends "CLIENT
    PROTOCOL 2\\n" and reads "SERVER PROTOCOL n"; "TIMEOUT s\\n" (the RAS collective's per-leg
    timeout) is answered "OK"; "SET FORMAT json\\n" is answered "OK" (2.28+); "VERBOSE STATUS\\n"
    is answered with the report until the server closes the connection."""
    deadline = Deadline.after(deadline_s) if deadline is None else deadline
    try:
        with _connect(host, port, deadline, pid) as sock:
            hello = _command(sock, f"CLIENT PROTOCOL {PROTOCOL}", deadline)
            if not hello.upper().startswith("SERVER PROTOCOL"):
                raise RasError(f"unexpected greeting {hello[:80]!r}")
            if _command(sock, f"TIMEOUT {LEG_TIMEOUT_S}", deadline).upper() != "OK":
                raise RasError("the server refused TIMEOUT")
            if fmt != "text" and _command(sock, f"SET FORMAT {fmt}", deadline).upper() != "OK":
                raise FormatRefused(f"the server does not speak {fmt}")
            sock.sendall(b"VERBOSE STATUS\n")
            chunks: List[bytes] = []
            size = 0
            while size < MAX_BYTES:
                sock.settimeout(_left(deadline, "complete answer"))
                chunk = sock.recv(min(65536, MAX_BYTES - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except (OSError, socket.timeout, OverflowError) as exc:
        if time.monotonic() >= deadline.at:
            raise RasError(f"no complete answer within the probe's {deadline.seconds:g} s"
                           ) from None
        raise RasError(f"{type(exc).__name__}: {exc}") from exc


def _ask(service: RasService, deadline: Deadline) -> ev.NcclRasStatus:
    """One service's event: JSON, else text (module doc), by ``deadline``, from the network
    namespace of the process that listens."""
    host, port, where = service.host, service.port, service.pid
    text, fmt, error = "", "json", ""
    try:
        text = query(host, port, fmt="json", deadline=deadline, pid=where)
    except FormatRefused:
        fmt = "text"
        try:
            text = query(host, port, fmt="text", deadline=deadline, pid=where)
        except RasError as exc:
            error = str(exc)
    except RasError as exc:
        error = str(exc)
    return ev.NcclRasStatus(ts=time.time(), pid=where, host=host, port=port, fmt=fmt,
                            text=text, error=error)


def nccl_ras_probe(pids: List[int], analyzer: object = None, *,
                   seconds: float = SECONDS) -> List[ev.Event]:
    """EndProbe (record/session.py): one NcclRasStatus per RAS service of the tree (its
    listeners as the analyzer's last look at each process saw them, where it has one), all
    asked at once and done within ``seconds`` (module doc)."""
    deadline = Deadline.after(seconds)
    services = ras_addresses(pids, getattr(analyzer, "listening", None))
    asked = services[:MAX_SERVICES]
    box: Dict[int, ev.NcclRasStatus] = {}

    def run(i: int, service: RasService) -> None:
        try:
            box[i] = _ask(service, deadline)
        except Exception as exc:  # one service's trouble is its event's error, not the probe's
            box[i] = ev.NcclRasStatus(ts=time.time(), pid=service.pid, host=service.host,
                                      port=service.port, fmt="json", text="",
                                      error=f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(i, s), name="hangtrace-ras", daemon=True)
               for i, s in enumerate(asked)]
    for t in threads:
        t.start()
    grace = deadline.at + 1.0        # the sockets' own timeouts end every thread by then
    for t in threads:                # in slices: a stop leaves them (daemons) to their bound
        if not cancel.wait(t, grace - time.monotonic()) and cancel.stopping():
            break
    stop = cancel.stopping()
    out: List[ev.Event] = []
    for i, s in enumerate(services):
        e = box.get(i)
        if e is None:
            why = (f"not asked: more than {MAX_SERVICES} RAS services" if i >= len(asked)
                   else f"no answer: {stop} ended the recording" if stop
                   else f"no answer within the probe's {seconds:g} s")
            e = ev.NcclRasStatus(ts=time.time(), pid=s.pid, host=s.host, port=s.port,
                                 fmt="json", text="", error=why)
        out.append(e)
    return out


nccl_ras_probe.__name__ = "NCCL RAS"
