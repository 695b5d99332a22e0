"""PyTorch Flight Recorder dump files into ``FlightRecorderDump`` events.

Contract:
- ``read_dump(path, rank, pid)`` reads one file of the user's (``dump_from_bytes`` parses one a
  traced process named, read by linux/target_files.py) (at most ``fr_pickle.MAX_BYTES``): a
  pickle through the plain-data reader (fr_pickle.py), or the JSON form; never raises: trouble
  is the event's ``error``, one line. What is kept is ``normalize``'s.
- ``rank_of(name, prefix)``: the rank a dump file's name carries (``<prefix><rank>``, as
  torch's DebugInfoWriter names them; fr_trace infers the prefix the same way).
- ``find_dumps(path)``: a directory (its files that end in a number, under one common prefix),
  a prefix ("/tmp/nccl_trace_rank_": the files that start with it) or one file -> [(path,
  rank)]. ``read_dumps(path)`` reads them all (``hangtrace analyze DIR``).
"""
from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Dict, List, Optional, Tuple

from ..events.shapes import INT64_MAX, INT64_MIN
from ..linux.intparse import is_digits
from ..events.stacks import FlightRecorderDump
from .fr_pickle import MAX_BYTES, UnsafePickle, load_plain

__all__ = ["read_dump", "dump_from_bytes", "read_dumps", "find_dumps", "rank_of", "normalize", "looks_like_dump",
           "MAX_ENTRIES"]

MAX_ENTRIES = 2048
MAX_FRAMES = 16
MAX_TEXT = 512
_INT_KEYS = ("record_id", "pg_id", "collective_seq_id", "p2p_seq_id", "op_id",
             "time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns",
             "timeout_ms")
_TEXT_KEYS = ("profiling_name", "state", "thread_name")
_BOOL_KEYS = ("retired", "is_p2p")
_STATUS_KEYS = ("last_enqueued_collective", "last_started_collective",
                "last_completed_collective")
_RANK_SUFFIX = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)$")
_INT_TEXT = re.compile(r"-?[0-9]+")


def rank_of(name: str, prefix: str = "") -> Optional[int]:
    base = os.path.basename(name)
    if prefix and base.startswith(os.path.basename(prefix)):
        rest = base[len(os.path.basename(prefix)):]
        return _int(rest) if is_digits(rest) else None
    m = _RANK_SUFFIX.match(base)
    return _int(m.group("rank")) if m else None


def _int(v: Any) -> Optional[int]:
    """An int of 64 bits (events/shapes.Int), or the decimal text of one; else None (a
    5,000-digit number is no sequence number: int() of its text would raise)."""
    if type(v) is str and len(v) <= 24 and _INT_TEXT.fullmatch(v.strip()):
        v = int(v)
    if type(v) is int and INT64_MIN <= v <= INT64_MAX:
        return v
    return None


def _text(v: Any) -> str:
    """A text value cut to MAX_TEXT; a number as its text (a huge int: ""); "" for others."""
    if type(v) is str:
        return v[:MAX_TEXT]
    if type(v) is int:
        return str(v) if INT64_MIN <= v <= INT64_MAX else ""
    return str(v)[:MAX_TEXT] if type(v) in (float, bool) else ""


def _sizes(v: Any) -> List[List[int]]:
    if not isinstance(v, (list, tuple)):
        return []
    return [[n for n in map(_int_value, s[:64]) if n is not None]
            for s in v[:64] if isinstance(s, (list, tuple))]


def _int_value(v: Any) -> Optional[int]:
    """An int of 64 bits, never its text (tensor sizes)."""
    return v if type(v) is int and INT64_MIN <= v <= INT64_MAX else None


def _entry(e: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {k: _int(e.get(k)) for k in _INT_KEYS}
    out.update({k: _text(e.get(k)) for k in _TEXT_KEYS})
    out.update({k: bool(e.get(k)) for k in _BOOL_KEYS})
    pg = e.get("process_group")
    out["process_group"] = [_text(x) for x in pg[:2]] if isinstance(pg, (list, tuple)) else []
    for k in ("input_sizes", "output_sizes"):
        out[k] = _sizes(e.get(k))
    for k in ("input_dtypes", "output_dtypes"):
        v = e.get(k)
        out[k] = [_text(x) for x in v[:64]] if isinstance(v, (list, tuple)) else []
    frames = e.get("frames") if isinstance(e.get("frames"), list) else []
    out["frames"] = [{"name": _text(f.get("name")), "filename": _text(f.get("filename")),
                      "line": _int(f.get("line"))}
                     for f in frames[:MAX_FRAMES] if isinstance(f, dict)]
    return out


def normalize(obj: Any, ev: FlightRecorderDump) -> FlightRecorderDump:
    """Fill ``ev`` from a dump's top-level dict: the known keys, typed, the newest ``MAX_ENTRIES``
    entries and ``MAX_FRAMES`` frames each; numbers of 64 bits (events/shapes.py: a larger one is
    None, as a missing one), texts cut to ``MAX_TEXT``. Facts (torch 2.13,
    FlightRecorderDetail.hpp): keys version, pg_config {name: {name, desc, ranks "[0, 1]"}},
    comm_lib_version, pg_status {pg_id: {last_enqueued_collective, last_started_collective,
    last_completed_collective}} (strings in the JSON form), entries."""
    if not isinstance(obj, dict):
        ev.error = f"not a Flight Recorder dump (a {type(obj).__name__}, not a dict)"
        return ev
    if "entries" not in obj and "pg_status" not in obj:
        ev.error = "not a Flight Recorder dump (no entries, no pg_status)"
        return ev
    ev.version = _text(obj.get("version"))
    ev.comm_lib_version = _text(obj.get("comm_lib_version") or obj.get("nccl_version"))
    cfg = obj.get("pg_config") if isinstance(obj.get("pg_config"), dict) else {}
    ev.pg_config = [{"key": _text(k), "name": _text(v.get("name")), "desc": _text(v.get("desc")),
                     "ranks": _text(v.get("ranks"))}
                    for k, v in list(cfg.items())[:1024] if isinstance(v, dict)]
    status = obj.get("pg_status") if isinstance(obj.get("pg_status"), dict) else {}
    ev.pg_status = [dict({"pg_id": _text(k)}, **{s: _int(v.get(s)) for s in _STATUS_KEYS})
                    for k, v in list(status.items())[:1024] if isinstance(v, dict)]
    entries = obj.get("entries") if isinstance(obj.get("entries"), list) else []
    entries = [e for e in entries if isinstance(e, dict)]
    ev.dropped = max(0, len(entries) - MAX_ENTRIES)
    ev.entries = [_entry(e) for e in entries[-MAX_ENTRIES:]]
    return ev


def read_dump(path: str, rank: Optional[int] = None, pid: int = 0,
              now: Optional[float] = None) -> FlightRecorderDump:
    ev = FlightRecorderDump(ts=time.time() if now is None else now, path=path,
                            rank=rank if rank is not None else rank_of(path), pid=pid)
    try:
        st = os.stat(path)
        ev.mtime, ev.size = st.st_mtime, st.st_size
        if st.st_size > MAX_BYTES:
            ev.error = f"{st.st_size} bytes: larger than the {MAX_BYTES >> 20} MiB bound"
            return ev
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        ev.error = f"{exc.strerror or exc}"
        return ev
    return dump_from_bytes(data, ev)


def dump_from_bytes(data: bytes, ev: FlightRecorderDump) -> FlightRecorderDump:
    """Fill ``ev`` from a dump file's content (``read_dump`` once the file is read).
    The pickle is what ``TORCH_NCCL_DUMP_ON_TIMEOUT`` and ``_dump_fr_trace()`` write; the JSON form
    ``_dump_fr_trace_json()``'s."""
    try:
        if data[:1] in (b"{", b"[") or data[:3] == b"\xef\xbb\xbf":
            obj = json.loads(data.decode("utf-8-sig"))
        else:
            obj = load_plain(data)
    except UnsafePickle as exc:
        ev.error = str(exc)
        return ev
    except (ValueError, RecursionError) as exc:
        ev.error = f"not readable JSON: {str(exc)[:160]}"
        return ev
    return normalize(obj, ev)


def looks_like_dump(path: str) -> bool:
    """A pickle (protocol 2+) or a JSON object naming the dump's keys, by its first bytes: what
    tells a directory of dumps from one of strace -ff logs (PREFIX.TID) before reading."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return True
    text = head.lstrip()
    return text[:1] == b"{" and any(k in text for k in (b'"entries"', b'"pg_status"',
                                                          b'"pg_config"'))


def find_dumps(path: str) -> List[Tuple[str, Optional[int]]]:
    """[(file, rank)] of the dumps at ``path`` (module doc)."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n))
                       and looks_like_dump(os.path.join(path, n)))
        groups: Dict[str, List[str]] = {}
        for n in names:
            m = _RANK_SUFFIX.match(n)
            if m and not n.endswith((".gz", ".json", ".txt")):
                groups.setdefault(m.group("prefix"), []).append(n)
        if not groups:
            return []
        prefix = max(groups, key=lambda p: len(groups[p]))
        return [(os.path.join(path, n), rank_of(n, prefix)) for n in groups[prefix]]
    if os.path.isfile(path):
        return [(path, rank_of(path))]
    folder, base = os.path.split(path)
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        return []
    return [(os.path.join(folder, n), rank_of(n, base)) for n in names
            if n.startswith(base) and is_digits(n[len(base):])]


def read_dumps(path: str) -> List[FlightRecorderDump]:
    return [read_dump(p, rank) for p, rank in find_dumps(path)]
