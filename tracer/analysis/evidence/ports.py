"""Ports a command line names, and which of them nothing in the tree listens on (pure).

Contract:
- ``ports_asked(argv)`` -> ``PortAsk`` per port an argv names (``--port 8000``, any other
  ``--*port`` option, ``host:port`` values). ``serves`` is True for the options that ask the
  process itself to listen (``SERVE_OPTIONS``, ``--bind``/``--listen`` values); rendezvous
  ports (NCCL, torch.distributed master) are listened on by one rank only.
- ``check_ports(procs)`` -> (listening [(pid, socket text)], asks): each distinct port asked
  in the tree with whether any process of the tree listens on it (any address). A port on a
  host that is not local (not loopback, any-address or localhost) is a peer's: ``local`` False.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ...linux.intparse import parse_uint

__all__ = ["PortAsk", "ports_asked", "check_ports", "listen_port", "SERVE_OPTIONS"]

SERVE_OPTIONS = {"--port", "--http-port", "--grpc-port", "--api-port", "--server-port",
                 "--listen-port", "--metrics-port", "--bind", "--listen"}
_PORT_OPT = re.compile(r"^--[A-Za-z0-9_-]*port$")
_ADDR_OPT = re.compile(r"^--[A-Za-z0-9_-]*(addr|address|bind|listen|endpoint|url)$")
_HOSTPORT = re.compile(r"^(?:[a-z]+://)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]*):([0-9]{1,5})(?:/.*)?$")
_IP_HOST = re.compile(r"^([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+|\[[0-9a-fA-F:]+\]|localhost)$")
_LOCAL = re.compile(r"^(|0\.0\.0\.0|\[?::\]?|\[?::1\]?|localhost|127\.[0-9]+\.[0-9]+\.[0-9]+|\*)$")


@dataclass
class PortAsk:
    port: int
    option: str            # "--port", "--dist-init-addr", "argument"
    host: str = ""
    serves: bool = False
    local: bool = True
    pids: List[int] = field(default_factory=list)
    listened_by: List[int] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"port": self.port, "option": self.option, "host": self.host,
                "serves": self.serves, "local": self.local, "pids": self.pids,
                "listened_by": self.listened_by}


def _port(text: str) -> Optional[int]:
    """A port given on a command line ("--port ²" is none: ASCII digits only)."""
    port = parse_uint(text, 5)
    return port if port is not None and 0 < port < 65536 else None


def _split_opts(argv: Sequence[str]) -> List[Tuple[str, str]]:
    """[(option, value)] for "--opt value" and "--opt=value"; a bare argument is ("", arg)."""
    out: List[Tuple[str, str]] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and "=" in a:
            opt, _, val = a.partition("=")
            out.append((opt, val))
        elif a.startswith("--") and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            out.append((a, argv[i + 1]))
            i += 1
        else:
            out.append(("", a))
        i += 1
    return out


def ports_asked(argv: Sequence[str]) -> List[PortAsk]:
    """Ports named by one command line: ``--port 8000`` / ``--port=8000`` and any other ``--*port``
    / ``--*_port`` option (``--http-port``, ``--nccl-port``, ``--master-port``), and ``host:port``
    values (``--host 0.0.0.0 --port 8000`` pairs the host; ``--dist-init-addr 10.0.0.1:5000``,
    ``tcp://127.0.0.1:29500``; a bare argument only when it is a URL or its host an IP address or
    localhost)."""
    pairs = _split_opts(argv[1:] if argv else [])
    host = next((v for o, v in pairs if o == "--host"), "")
    out: List[PortAsk] = []
    for opt, val in pairs:
        norm = opt.replace("_", "-")
        if opt and _PORT_OPT.match(norm):
            p = _port(val)
            if p is not None:
                h = host if norm == "--port" else ""
                out.append(PortAsk(p, opt, h, norm in SERVE_OPTIONS, bool(_LOCAL.match(h))))
            continue
        if opt and not _ADDR_OPT.match(norm):
            continue
        m = _HOSTPORT.match(val)
        if not m or (not opt and "://" not in val and not _IP_HOST.match(m.group(1))):
            continue       # a bare "a:b" argument is too often not an address ("mod:app")
        p = _port(m.group(2))
        if p is not None:
            h = m.group(1)
            serves = norm in ("--bind", "--listen") or norm.endswith(("-bind", "-listen"))
            out.append(PortAsk(p, opt or "argument", h, serves, bool(_LOCAL.match(h))))
    return out


def listen_port(sock: str) -> Optional[int]:
    """8000 from "tcp 127.0.0.1:8000" / "tcp6 [::]:8000"; None for unix sockets."""
    proto, _, addr = sock.partition(" ")
    if not proto.startswith(("tcp", "udp")):
        return None
    return _port(addr.rsplit(":", 1)[-1])


def check_ports(procs: Iterable[Tuple[int, Sequence[str], Sequence[str]]]
                ) -> Tuple[List[Tuple[int, str]], List[PortAsk]]:
    """(listening, asks) of a tree given (pid, argv, listening sockets) per process."""
    listening: List[Tuple[int, str]] = []
    asks: Dict[Tuple[int, str], PortAsk] = {}
    for pid, argv, socks in procs:
        listening.extend((pid, s) for s in socks)
        for a in ports_asked(argv):
            key = (a.port, a.option)
            if key in asks:
                if pid not in asks[key].pids:
                    asks[key].pids.append(pid)
            else:
                a.pids = [pid]
                asks[key] = a
    by_port: Dict[int, List[int]] = {}
    for pid, s in listening:
        p = listen_port(s)
        if p is not None and pid not in by_port.setdefault(p, []):
            by_port[p].append(pid)
    for a in asks.values():
        a.listened_by = by_port.get(a.port, [])
    return listening, sorted(asks.values(), key=lambda a: (a.port, a.option))
