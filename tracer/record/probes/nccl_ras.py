"""Ask NCCL's RAS service what the job itself knows: which rank is behind, missing or dead.

Contract: ``nccl_ras_probe(pids, analyzer)`` is an ``EndProbe``. When a traced process listens
on NCCL's RAS port (``ras_addresses``), it connects to that address once (read only: the RAS
client protocol has no command that changes the job) and returns one ``NcclRasStatus`` event
with the raw answer, so that ``analyze`` of the saved trace reaches the same verdict. It asks
for JSON first and falls back to text when the server refuses ``SET FORMAT`` (the protocol:
``query``). Everything is bounded (``deadline_s`` per address, ``MAX_BYTES``) and never
fatal: trouble becomes the event's ``error``. It only ever connects to an address a traced
process listens on.
"""
from __future__ import annotations

import socket
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ... import events as ev
from ...linux import procfs
from .socket_peers import socket_inodes

RAS_PORT = 28028
PROTOCOL = 2
MAX_BYTES = 4 << 20
LEG_TIMEOUT_S = 2          # what we ask the RAS collective to wait for each peer


class RasError(Exception):
    pass


class FormatRefused(RasError):
    """The server does not know SET FORMAT (NCCL before 2.28): ask again in text."""


def _parse_addr(text: str) -> Optional[Tuple[str, int]]:
    """NCCL_RAS_ADDR "host:port" / "[v6]:port" / "port"; None when unreadable."""
    text = text.strip()
    host, _, port = text.rpartition(":")
    if not port.isdigit():
        return None
    return (host.strip("[]") or "127.0.0.1"), int(port)


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


def ras_addresses(pids: Sequence[int],
                  known: Optional[Listening] = None) -> Dict[Tuple[str, int], int]:
    """{(host, port): pid of a listener} for the RAS services the traced tree runs.
    The port is 28028 (``RAS_PORT``), or the port of ``NCCL_RAS_ADDR`` in the process's
    environment; a process whose environment says ``NCCL_RAS_ENABLE=0`` is skipped. Only a
    process that listens on TCP has its environment read. ``known(pid)``: its listening
    sockets as the recording's last look at it saw them (None: not known, read /proc)."""
    out: Dict[Tuple[str, int], int] = {}
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
            out.setdefault((host, port), pid)
    return out


def _read_line(sock: socket.socket, deadline: float) -> str:
    buf = b""
    while not buf.endswith(b"\n") and len(buf) < 4096:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        chunk = sock.recv(1)
        if not chunk:
            break
        buf += chunk
    return buf.decode("utf-8", "replace")


def _command(sock: socket.socket, line: str, deadline: float) -> str:
    sock.sendall(line.encode() + b"\n")
    return _read_line(sock, deadline).strip()


def query(host: str, port: int, *, fmt: str = "json", deadline_s: float = 8.0) -> str:
    """The server's VERBOSE STATUS answer in ``fmt`` ("json" or "text"); RasError on trouble.
    Protocol (NVIDIA/nccl src/ras/client.cc, protocol 2, NCCL 2.24+): the client sends "CLIENT
    PROTOCOL 2\\n" and reads "SERVER PROTOCOL n"; "TIMEOUT s\\n" (the RAS collective's per-leg
    timeout) is answered "OK"; "SET FORMAT json\\n" is answered "OK" (2.28+); "VERBOSE STATUS\\n"
    is answered with the report until the server closes the connection."""
    deadline = time.monotonic() + deadline_s
    try:
        with socket.create_connection((host, port), timeout=1.0) as sock:
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
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RasError(f"no complete answer within {deadline_s:g} s")
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except (OSError, socket.timeout) as exc:
        raise RasError(f"{type(exc).__name__}: {exc}") from exc


def nccl_ras_probe(pids: List[int], analyzer: object = None) -> List[ev.Event]:
    """EndProbe (record/session.py): one NcclRasStatus per RAS service of the tree (its
    listeners as the analyzer's last look at each process saw them, where it has one)."""
    out: List[ev.Event] = []
    known = getattr(analyzer, "listening", None)
    for (host, port), pid in sorted(ras_addresses(pids, known).items()):
        text, fmt, error = "", "json", ""
        try:
            text = query(host, port, fmt="json")
        except FormatRefused:
            fmt = "text"
            try:
                text = query(host, port, fmt="text")
            except RasError as exc:
                error = str(exc)
        except RasError as exc:
            error = str(exc)
        out.append(ev.NcclRasStatus(ts=time.time(), pid=pid, host=host, port=port, fmt=fmt,
                                    text=text, error=error))
    return out


nccl_ras_probe.__name__ = "NCCL RAS"
