"""Validation of a trace's header (the rows are checked by the codec: codec.py, msgspec).

Contract: ``check_header(header)`` returns None for a header the reader and the analyzer can
use, else one line saying which field is wrong ("header field 'processes' is not a list").
Optional fields may be absent; present ones must have the documented types.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from ..errors import shown
from ..events.shapes import TIME_MAX, TIME_MIN

__all__ = ["check_header"]


# --------------------------------------------------------------------------- value checks
def _time(v: Any) -> bool:
    """A time as every event's ``ts`` is one (events/shapes.py ``Time``: years 1 to 9999)."""
    return type(v) in (int, float) and TIME_MIN <= v <= TIME_MAX


def _str_list(v: Any) -> bool:
    if type(v) is not list:
        return False
    for x in v:                  # a loop: twice as fast as all() over a generator
        if type(x) is not str:
            return False
    return True


def _int_list(v: Any) -> bool:
    if type(v) is not list:
        return False
    for x in v:
        if type(x) is not int:
            return False
    return True


# --------------------------------------------------------------------------- header
def _node(v: Any) -> bool:
    """The node a recording ran on (linux/netns.py): every part optional, typed when present."""
    return (type(v) is dict and type(v.get("hostname", "")) is str
            and (v.get("netns") is None or type(v.get("netns")) is int)
            and type(v.get("netns_name", "")) is str and _str_list(v.get("addrs", [])))


def _opt(h: Dict[str, Any], key: str, ok: Callable[[Any], bool], what: str) -> Optional[str]:
    if key in h and not ok(h[key]):
        return f"header field {key!r} is not {what}"
    return None


def check_header(h: Any) -> Optional[str]:
    """None when ``h`` is a usable header, else one line saying what is wrong (module doc)."""
    if type(h) is not dict:
        return "the header is not a JSON object"
    if type(h.get("version")) is not int:
        return f"header field 'version' is not an integer ({shown(h.get('version'))})"
    checks = [
        ("backends", _str_list, "a list of strings"),
        ("source", lambda v: type(v) is str, "a string"),
        ("start", lambda v: v is None or _time(v), "a time (epoch seconds, years 1 to 9999)"),
        ("targets", _int_list, "a list of pids"),
        ("options", lambda v: type(v) is dict, "an object"),
        ("processes", lambda v: type(v) is list and all(type(r) is list for r in v),
         "a list of rows"),
        ("roles", lambda v: type(v) is dict and all(type(x) is str for x in v.values()),
         "an object of strings"),
        ("schema", lambda v: type(v) is dict and all(_str_list(x) for x in v.values()),
         "an object of field lists"),
    ]
    for key, ok, what in checks:
        bad = _opt(h, key, ok, what)
        if bad:
            return bad
    for key in ("host", "kernel", "machine", "clock", "writer"):
        bad = _opt(h, key, lambda v: v is None or type(v) is str, "a string")
        if bad:
            return bad
    bad = _opt(h, "node", _node, "an object of hostname, netns, netns_name and addrs")
    if bad:
        return bad
    opts = h.get("options") or {}
    caps = opts.get("capabilities")
    if caps is not None and not (type(caps) is dict
                                 and all(type(v) is bool for v in caps.values())):
        return "header field 'options.capabilities' is not an object of booleans"
    if "errors" in opts and not _str_list(opts["errors"]):
        return "header field 'options.errors' is not a list of strings"
    return None
