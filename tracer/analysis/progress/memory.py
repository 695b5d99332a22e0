"""Memory brought in during the window: a thread that faults pages in (a loader reading
weights through mmap, as safetensors does) is doing work that advances, whatever it writes.

Contract: ``loading(p, tid, window)`` -> a sentence when thread ``tid`` of process ``p`` made
at least ``LOAD_MIN_FAULTS`` page faults at ``LOAD_MIN_FAULT_RATE`` a second or more between
the start and the end ``MemoryProgress`` of the window while memory really came in: the
process read from storage, grew its resident size, or a file it maps became more resident, at
``LOAD_MIN_RATE`` bytes a second or more (a fault brings up to hundreds of KiB of a file with
readahead, so faults say who, bytes say how much); else None. The sentence names the faults,
the bytes and their rate and the mapped file that grew most, how much of it is resident and,
at that rate, how long the rest takes ("loading model-00003.safetensors: 2.1 of 4.9 GiB
resident (+1.0 GiB, 210 MiB/s), about 13 s left"). ``file_growth(p, window)`` is that part.
"""
from __future__ import annotations

from typing import List, Optional

from ..accumulate.stats import ProcessStats

__all__ = ["loading", "file_growth", "LOAD_MIN_FAULTS", "LOAD_MIN_FAULT_RATE"]

LOAD_MIN_FAULTS = 64            # a spin or a poll loop makes none
LOAD_MIN_FAULT_RATE = 10.0      # faults a second
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


def file_growth(p: ProcessStats, window: float) -> Optional[str]:
    """The mapped file of ``p`` whose resident bytes grew most in the window (module doc)."""
    a, b = p.memory.get("start"), p.memory.get("end")
    if a is None or b is None:
        return None
    window = _span(p, window)
    before = {f[0]: f[1] for f in a.files if len(f) == 3}
    best = None
    for path, rss, size in (f for f in b.files if len(f) == 3):
        grew = rss - before.get(path, 0)
        if grew > 0 and (best is None or grew > best[1]):
            best = (path, grew, rss, size)
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


def loading(p: ProcessStats, tid: int, window: float) -> Optional[str]:
    """The evidence that thread ``tid`` brings memory in (module doc), or None."""
    a, b = p.memory.get("start"), p.memory.get("end")
    if a is None or b is None or tid not in a.faults or tid not in b.faults:
        return None
    minor = b.faults[tid][0] - a.faults[tid][0]
    major = b.faults[tid][1] - a.faults[tid][1]
    n, span = minor + major, _span(p, window)
    if n < LOAD_MIN_FAULTS or n / span < LOAD_MIN_FAULT_RATE:
        return None
    grew = file_growth(p, window)
    came = _came_in(p, span)
    if not came and grew is None:
        return None
    text = (f"faulted memory in: {minor} minor and {major} major page faults ({n / span:.0f}/s)"
            f" while {' and '.join(came) if came else 'a mapped file became more resident'}")
    where = grew or _resident(p)
    return f"{text}; {where}" if where else text
