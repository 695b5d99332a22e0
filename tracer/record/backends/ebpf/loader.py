"""The two ways hangtrace loads its BPF programs, behind one small interface, and which one
runs here.

Contract:
- ``Program``: what a loaded program gives its backend, whichever loader made it (maps, the
  ring buffer, uprobes, detach and close: its docstring); ``loader`` ("libbpf" or "bcc") and
  ``load_s`` (seconds to load and attach).
- ``MapView``: keys and values as bytes in the C layout (its docstring).
- ``LOADERS``: ("libbpf", "bcc"), in the order ``--backend ebpf`` tries them.
  ``preferred()`` reads ``$HANGTRACE_EBPF_LOADER`` (libbpf|bcc; empty or auto: both).
Which of them can run here is env.py's (``choose``). Pure: imports nothing of either.
"""
from __future__ import annotations

import os
from typing import Callable, List, Optional, Protocol, Tuple

__all__ = ["Program", "MapView", "LOADERS", "preferred", "OnRecord"]

LOADERS = ("libbpf", "bcc")
OnRecord = Callable[[int, int], Optional[bool]]   # True: enough for this drain


class MapView(Protocol):
    """Keys and values as bytes in the C layout: ``items()`` (every entry, in batches where the
    kernel allows), ``get(key)`` (None when absent), ``set(key, value, only_new=False)`` (False
    when ``only_new`` and the key exists), ``percpu(key)`` (a per-CPU map's values, one per
    possible CPU)."""
    def items(self) -> List[Tuple[bytes, bytes]]: ...

    def get(self, key: bytes) -> Optional[bytes]: ...

    def set(self, key: bytes, value: bytes, only_new: bool = False) -> bool: ...

    def percpu(self, key: bytes) -> List[bytes]: ...


class Program(Protocol):
    """What a loaded program gives its backend, whichever loader made it: ``map(name)`` ->
    ``MapView``; ``open_ring(name, on_record)`` (``on_record(data, size)`` gets each ring buffer
    record's address, valid during the call; when it returns True the poll or consume in progress
    ends there, the records after it left in the ring for the next: the backend's bound on work per
    drain, a producer faster than the reader never holds it in one poll); ``poll(ms)``,
    ``consume()``; ``ring_fd(name)``: the ring buffer's fd, readable while records wait in it
    (to wait on it with other fds, then ``consume()``); ``attach_uprobe(program, binary, symbol, file_offset, retprobe=False)`` (a
    uretprobe when ``retprobe``); ``detach()`` (idempotent: nothing runs in the kernel after it;
    maps stay readable); ``close()`` (idempotent: detaches, frees every map and program fd);
    ``loader`` ("libbpf" or "bcc") and ``load_s`` (seconds to load and attach)."""
    loader: str
    load_s: float

    def map(self, name: str) -> MapView: ...

    def open_ring(self, name: str, on_record: OnRecord) -> None: ...

    def poll(self, timeout_ms: int) -> None: ...

    def consume(self) -> None: ...

    def ring_fd(self, name: str) -> int: ...

    def attach_uprobe(self, program: str, binary: str, symbol: str, offset: int,
                      retprobe: bool = False) -> None: ...

    def detach(self) -> None: ...

    def close(self) -> None: ...


def preferred() -> Tuple[str, ...]:
    """The loaders to try, from $HANGTRACE_EBPF_LOADER (module doc)."""
    want = os.environ.get("HANGTRACE_EBPF_LOADER", "").strip().lower()
    if want in LOADERS:
        return (want,)
    return LOADERS
