"""The BCC fallback: bpf/NAME.bpf.c compiled by BCC at attach, as loader.py's ``Program``.

Contract:
- ``BccProgram(text, cflags)`` compiles and loads ``text`` (source.bcc_text) with ``cflags``
  (env.compile_flags); BCC attaches its RAW_TRACEPOINT_PROBE / TRACEPOINT_PROBE entry points
  itself. ``load_s``: the seconds that took (mostly LLVM). ``bcc`` is imported here only.
- ``attach_uprobe(program, binary, symbol, offset)``: BCC resolves ``symbol`` itself.
- ``BccMap`` wraps a BCC table as a MapView (bytes in, bytes out).
- ``detach()`` detaches every tracepoint and uprobe (the maps stay readable); ``close()``
  is BPF.cleanup (every fd closed). Both idempotent.
"""
from __future__ import annotations

import ctypes as ct
import threading
import time
from typing import Any, List, Optional, Sequence, Tuple

from .loader import OnRecord

__all__ = ["BccProgram", "BccMap"]


class BccMap:
    """A BCC table as a MapView (loader.py)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def _key(self, key: bytes) -> Any:
        return self.table.Key.from_buffer_copy(key)

    def get(self, key: bytes) -> Optional[bytes]:
        try:
            return _raw(self.table[self._key(key)], self.table.Leaf)
        except KeyError:
            return None

    def set(self, key: bytes, value: bytes, only_new: bool = False) -> bool:
        k = self._key(key)
        if only_new and self.get(key) is not None:
            return False
        self.table[k] = self.table.Leaf.from_buffer_copy(value)
        return True

    def percpu(self, key: bytes) -> List[bytes]:
        return [_raw(v, self.table.Leaf) for v in self.table.getvalue(self._key(key))]

    def items(self) -> List[Tuple[bytes, bytes]]:
        try:
            pairs = list(self.table.items_lookup_batch())
        except Exception:  # noqa: BLE001 - older kernels/BCC: one lookup per key
            pairs = list(self.table.items())
        return [(_raw(k, self.table.Key), _raw(v, self.table.Leaf)) for k, v in pairs]


class BccProgram:
    """A program compiled and loaded by BCC (module doc)."""

    loader = "bcc"

    def __init__(self, text: str, cflags: Sequence[str]) -> None:
        from bcc import BPF  # noqa: WPS433 (see the module doc)
        t0 = time.monotonic()
        self._bpf: Any = BPF(text=text.encode(), cflags=list(cflags))
        self.load_s = time.monotonic() - t0
        self._lock = threading.Lock()
        self._detached = False

    def map(self, name: str) -> BccMap:
        return BccMap(self._bpf[name.encode()])

    def open_ring(self, name: str, on_record: OnRecord) -> None:
        def sample(ctx: Any, data: Any, size: int) -> int:
            # a negative answer ends libbpf's drain there (loader.OnRecord: True)
            return -1 if on_record(ct.cast(data, ct.c_void_p).value or 0, size) else 0
        self._bpf[name.encode()].open_ring_buffer(sample)

    def poll(self, timeout_ms: int) -> None:
        self._bpf.ring_buffer_poll(timeout_ms)

    def consume(self) -> None:
        self._bpf.ring_buffer_consume()

    def ring_fd(self, name: str) -> int:
        return int(self._bpf[name.encode()].map_fd)

    def attach_uprobe(self, program: str, binary: str, symbol: str, offset: int,
                      retprobe: bool = False) -> None:
        attach = self._bpf.attach_uretprobe if retprobe else self._bpf.attach_uprobe
        attach(name=binary.encode(), sym=symbol.encode(), fn_name=program.encode())

    def detach(self) -> None:
        with self._lock:
            if self._detached or self._bpf is None:
                return
            self._detached = True
        b = self._bpf
        for tp in list(b.raw_tracepoint_fds):
            _quietly(b.detach_raw_tracepoint, tp=tp)
        for tp in list(b.tracepoint_fds):
            _quietly(b.detach_tracepoint, tp=tp)
        for ev in list(b.uprobe_fds):
            _quietly(b.detach_uprobe_event, ev)

    def close(self) -> None:
        with self._lock:
            b, self._bpf = self._bpf, None
        if b is not None:
            b.cleanup()   # detaches whatever is left, closes map and program fds


def _raw(value: Any, ctype: Any) -> bytes:
    """A table key or value in its C layout (BCC gives simple types as Python ints)."""
    if isinstance(value, int):
        return bytes(ctype(value))
    return bytes(value)


def _quietly(fn: Any, *args: Any, **kw: Any) -> None:
    try:
        fn(*args, **kw)
    except Exception:  # noqa: BLE001 - cleanup() detaches whatever is left
        pass
