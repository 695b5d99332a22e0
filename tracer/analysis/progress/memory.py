"""Memory brought in during the window: a thread that faults pages in (a loader reading
weights through mmap, as safetensors does) is doing work that advances, whatever it writes.

Contract: ``loading(p, tid, window)`` -> a sentence when memory really came into process ``p``
between the start and the end ``MemoryProgress`` of the window (storage reads, resident growth,
or a mapped file more resident, at ``LOAD_MIN_RATE`` bytes a second or more) and thread ``tid``
is the one that brought it (``_who``: its own storage reads, or its page faults: a fault maps up
to a large folio of a file, 2 MiB, so on a recent kernel a loader makes few); else None. The
sentence names the thread's share, the mapped file that grew most, how much of it is resident
and how long the rest takes at that rate ("loading model-00003.safetensors: 2.1 of 4.9 GiB
resident (+1.0 GiB, 210 MiB/s), about 13 s left"). ``file_growth(p, window)`` is that part.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from ..accumulate.stats import ProcessStats

__all__ = ["loading", "file_growth", "LOAD_MIN_FAULTS", "LOAD_MIN_FAULT_RATE", "LOAD_FEW_RATE",
           "LOAD_FEW_FAULTS"]

LOAD_MIN_FAULTS = 64            # a spin or a poll loop makes none
LOAD_MIN_FAULT_RATE = 10.0      # faults a second
LOAD_FEW_FAULTS = 8             # enough from the process's top faulter (large folios) ...
LOAD_FEW_RATE = 1 << 20         # ... while a file it maps grows this fast (bytes a second)
LOAD_MIN_RATE = 256 << 10       # bytes a second that came in (storage, RSS or a file mapping)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _span(p: ProcessStats, window: float) -> float:
    """Seconds between the start and the end readings (the window's when they lack times)."""
    a, b = p.memory.get("start"), p.memory.get("end")
    return b.ts - a.ts if a is not None and b is not None and b.ts > a.ts else max(window, 1e-9)


def _grown(p: ProcessStats) -> Optional[Tuple[str, int, int, int]]:
    """(path, bytes grown, resident, size) of the mapped file that grew most, None if none."""
    a, b = p.memory.get("start"), p.memory.get("end")
    if a is None or b is None:
        return None
    before = {f[0]: f[1] for f in a.files if len(f) == 3}
    best = None
    for path, rss, size in (f for f in b.files if len(f) == 3):
        grew = rss - before.get(path, 0)
        if grew > 0 and (best is None or grew > best[1]):
            best = (path, grew, rss, size)
    return best


def _file_rate(p: ProcessStats, span: float) -> float:
    best = _grown(p)
    return best[1] / span if best is not None else 0.0


def file_growth(p: ProcessStats, window: float) -> Optional[str]:
    """The mapped file of ``p`` whose resident bytes grew most in the window (module doc)."""
    best = _grown(p)
    window = _span(p, window)
    if best is None or best[1] / window < LOAD_MIN_RATE:
        return None
    path, grew, rss, size = best
    rate = grew / window
    left = max(0, size - rss)
    eta = f", about {left / rate:.0f} s left at that rate" if left and rate > 0 else ""
    name = path.rsplit("/", 1)[-1]
    return (f"loading {name}: {_size(rss)} of {_size(size)} resident (+{_size(grew)}, "
            f"{_size(rate)}/s){eta}")


def _came_in(p: ProcessStats, span: float) -> List[str]:
    """What came into memory at LOAD_MIN_RATE or more: storage reads, resident growth."""
    a, b = p.memory["start"], p.memory["end"]
    out = []
    if a.read_bytes is not None and b.read_bytes is not None:
        read = b.read_bytes - a.read_bytes
        if read / span >= LOAD_MIN_RATE:
            out.append(f"the process read {_size(read)} from storage ({_size(read / span)}/s)")
    if a.rss_bytes is not None and b.rss_bytes is not None:
        grew = b.rss_bytes - a.rss_bytes
        if grew / span >= LOAD_MIN_RATE:
            out.append(f"its resident size grew {_size(grew)} to {_size(b.rss_bytes)}")
    return out


def _resident(p: ProcessStats) -> Optional[str]:
    """The largest file the process maps at the end, with how much of it is resident."""
    b = p.memory["end"]
    files = [f for f in b.files if len(f) == 3]
    if not files:
        return None
    path, rss, size = max(files, key=lambda f: f[2])
    return f"{path.rsplit('/', 1)[-1]}: {_size(rss)} of {_size(size)} resident"


def _who(p: ProcessStats, tid: int, span: float) -> Optional[str]:
    """How thread ``tid`` brought memory in, None when it did not: it read from storage itself
    at ``LOAD_MIN_RATE`` (task/TID/io), or made ``LOAD_MIN_FAULTS`` page faults at
    ``LOAD_MIN_FAULT_RATE``, or at least ``LOAD_FEW_FAULTS`` and the most of its process while a
    file it maps grew ``LOAD_FEW_RATE`` a second (a library paged in lazily grows slower)."""
    a, b = p.memory["start"], p.memory["end"]
    if tid not in a.faults or tid not in b.faults:
        return None
    minor = b.faults[tid][0] - a.faults[tid][0]
    major = b.faults[tid][1] - a.faults[tid][1]
    n = minor + major
    faults = f"{minor} minor and {major} major page faults ({n / span:.0f}/s)"
    if tid in a.reads and tid in b.reads:
        read = b.reads[tid] - a.reads[tid]
        if read / span >= LOAD_MIN_RATE:
            return f"read {_size(read)} from storage itself ({_size(read / span)}/s) in {faults}"
    if n >= LOAD_MIN_FAULTS and n / span >= LOAD_MIN_FAULT_RATE:
        return faults
    others = (v[0] + v[1] - a.faults[t][0] - a.faults[t][1]
              for t, v in b.faults.items() if t != tid and t in a.faults)
    if n >= LOAD_FEW_FAULTS and n > max(others, default=0) \
            and _file_rate(p, span) >= LOAD_FEW_RATE:
        return f"{faults} (the most of its process)"
    return None


def loading(p: ProcessStats, tid: int, window: float) -> Optional[str]:
    """The evidence that thread ``tid`` brings memory in (module doc), or None."""
    if p.memory.get("start") is None or p.memory.get("end") is None:
        return None
    span = _span(p, window)
    who = _who(p, tid, span)
    if who is None:
        return None
    grew = file_growth(p, window)
    came = _came_in(p, span)
    if not came and grew is None:
        return None
    text = (f"faulted memory in: {who}"
            f" while {' and '.join(came) if came else 'a mapped file became more resident'}")
    where = grew or _resident(p)
    return f"{text}; {where}" if where else text
