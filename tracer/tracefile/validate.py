"""Validation of a trace's header and event rows against the event schema (events.py).

Contract:
- ``check_header(header)`` returns None for a header the reader and the analyzer can use, else
  one line saying which field is wrong ("header field 'processes' is not a list"). Optional
  fields may be absent; present ones must have the documented types.
- ``row_decoder(tag, names)`` returns a function ``row -> Event`` for rows written with field
  ``names`` (the header's schema; fields are mapped by name, unknown names ignored) that raises
  ``BadRow`` unless every known field has its declared type: ints are ints (never bools),
  floats are finite numbers (no NaN or infinity, which JSON readers accept), strings are
  strings, lists and dicts hold what the dataclass says. So a row that decodes is one the
  analyzer can use: a wrong type is a corrupt row (counted and skipped), never a crash later.
- The checks are compiled once per (tag, names) into one expression (``exec``, as dataclasses
  does): a million rows cost a fraction of a second more than unchecked decoding.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from .. import events as ev
from ..errors import shown

__all__ = ["BadRow", "check_header", "row_decoder", "type_codes"]


class BadRow(ValueError):
    """A row whose fields do not have the schema's types."""


# --------------------------------------------------------------------------- value checks
def _num(v: Any) -> bool:
    return type(v) in (int, float) and -1e308 <= v <= 1e308


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


def _int_key(k: Any) -> bool:
    return type(k) is str and 0 < len(k) <= 20 and (k.isdigit() or (k[0] == "-" and k[1:].isdigit()))


def _threads(v: Any) -> bool:        # Dict[int, str] as JSON: {"123": "comm"}
    return type(v) is dict and all(_int_key(k) and type(c) is str for k, c in v.items())


def _int_int_map(v: Any) -> bool:    # Dict[int, int]
    return type(v) is dict and all(_int_key(k) and type(c) is int for k, c in v.items())


def _int_intlist_map(v: Any) -> bool:    # Dict[int, List[int]]
    return type(v) is dict and all(_int_key(k) and _int_list(c) for k, c in v.items())


def _fd_row(f: Any) -> bool:         # FdInfo.to_list(): fd, kind, target, mode, pos, inode
    return (type(f) is list and 4 <= len(f) <= 6 and type(f[0]) is int
            and (f[1] is None or type(f[1]) is str) and type(f[2]) is str
            and type(f[3]) is str
            and all(x is None or type(x) is int for x in f[4:]))


def _fds(v: Any) -> bool:
    return type(v) is list and all(_fd_row(f) for f in v)


def _json_value(v: Any, depth: int = 0) -> bool:   # what JSON can hold, bounded in depth
    if depth > 8:
        return False
    if v is None or type(v) in (str, bool, int):
        return True
    if type(v) is float:
        return -1e308 <= v <= 1e308
    if type(v) is list:
        return all(_json_value(x, depth + 1) for x in v)
    if type(v) is dict:
        return all(type(k) is str and _json_value(x, depth + 1) for k, x in v.items())
    return False


def _dict_list(v: Any) -> bool:       # List[Dict[str, Any]]
    return type(v) is list and all(type(x) is dict and _json_value(x) for x in v)


def _list_list(v: Any) -> bool:       # List[List[Any]]
    return type(v) is list and all(type(x) is list and _json_value(x) for x in v)


def _str_str_map(v: Any) -> bool:     # Dict[str, str]
    return type(v) is dict and all(type(k) is str and type(c) is str for k, c in v.items())


def _str_int_map(v: Any) -> bool:     # Dict[str, int]
    return type(v) is dict and all(type(k) is str and type(c) is int for k, c in v.items())


_HELPERS: Dict[str, Callable[[Any], bool]] = {
    "_dict_list": _dict_list, "_list_list": _list_list, "_str_str_map": _str_str_map,
    "_str_int_map": _str_int_map,
    "_num": _num, "_str_list": _str_list, "_int_list": _int_list, "_threads": _threads,
    "_int_int_map": _int_int_map, "_int_intlist_map": _int_intlist_map, "_fds": _fds,
}
# Annotation text (events.py uses ``from __future__ import annotations``) -> check of ``{v}``.
_CHECKS = {
    "int": "type({v}) is int", "float": "(type({v}) in NUM and -1e308 <= {v} <= 1e308)",
    "str": "type({v}) is str", "bool": "type({v}) is bool", "List[str]": "_str_list({v})",
    "List[int]": "_int_list({v})", "List[FdInfo]": "_fds({v})",
    "Dict[int, str]": "_threads({v})", "Dict[int, int]": "_int_int_map({v})",
    "Dict[int, List[int]]": "_int_intlist_map({v})", "Tuple[str, ...]": "_str_list({v})",
    "List[Dict[str, Any]]": "_dict_list({v})", "List[List[Any]]": "_list_list({v})",
    "Dict[str, str]": "_str_str_map({v})", "Dict[str, int]": "_str_int_map({v})",
}


def _check_expr(annotation: str, v: str) -> str:
    if annotation.startswith("Optional[") and annotation.endswith("]"):
        inner = _check_expr(annotation[9:-1], v)
        return f"({v} is None or {inner})"
    try:
        return _CHECKS[annotation].format(v=v)
    except KeyError:
        raise TypeError(f"events.py field type {annotation!r} has no check") from None


def _annotations(cls: type) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for name, ann in getattr(klass, "__annotations__", {}).items():
            if isinstance(ann, str) and not ann.startswith("ClassVar"):
                out[name] = ann
    return out


# --------------------------------------------------------------------------- rows
# The checks the compiled row decoder makes itself (csrc/rows_in.c check_value), one letter per
# field; a row of a tag with any other field type is left to row_decoder.
_CODES = {"int": "i", "Optional[int]": "I", "float": "f", "Optional[float]": "F", "str": "s",
          "Optional[str]": "S", "bool": "b", "Optional[bool]": "B", "Tuple[str, ...]": "t",
          "List[str]": "L", "List[int]": "n"}


def type_codes(tag: str, names: List[str]) -> Optional[str]:
    """One letter per field of ``names`` saying what row_decoder accepts there (``_CODES``),
    or None when a field has a type the compiled decoder does not check."""
    types = _annotations(ev.EVENT_CLASSES[tag])
    codes = [_CODES.get(types.get(n, "")) for n in names]
    return None if None in codes else "".join(codes)  # type: ignore[arg-type]


def row_decoder(tag: str, names: List[str]) -> Callable[[list], ev.Event]:
    """A checking decoder for rows of ``tag`` written with field ``names`` (module doc)."""
    cls = ev.EVENT_CLASSES[tag]
    current = ev.field_names(cls)
    types = _annotations(cls)
    known = [(i + 1, n) for i, n in enumerate(names) if n in types]
    ns: Dict[str, Any] = dict(_HELPERS, cls=cls, BadRow=BadRow, NUM=(int, float))
    ns["_by_name"] = _by_name_decoder(cls, known)
    if names == current and tag not in ("pi", "skp"):
        # The writer's own layout (nearly every row): unpack into locals (a row of another
        # length fails right there), test each, construct positionally.
        args = [f"a{i}" for i in range(len(names))]
        conds = [_check_expr(types[n], a) for n, a in zip(names, args)]
        make = f"cls({', '.join(args)})"
        if tag == "pl":
            make = f"_poll(cls({', '.join(args)}))"
            ns["_poll"] = _poll
        src = (f"def decode(r, type=type):\n    _, {', '.join(args)}, = r\n"
               f"    if not ({' and '.join(conds)}):\n        raise BadRow()\n"
               f"    return {make}\n")
    else:
        conds = [_check_expr(types[n], f"r[{i}]") for i, n in known]
        src = (f"def decode(r, type=type):\n    if not ({' and '.join(conds) or 'True'}):\n"
               f"        raise BadRow()\n    return _by_name(r)\n")
    exec(src, ns)  # noqa: S102 - compiled from the dataclass annotations only
    return ns["decode"]


def _poll(e: Any) -> Any:
    e.fd_kinds = tuple(e.fd_kinds)
    return e


def _by_name_decoder(cls: type, known: List[tuple]) -> Callable[[list], ev.Event]:
    def decode(r: list) -> ev.Event:
        kw = {n: r[i] for i, n in known if i < len(r)}
        if "fds" in kw:
            kw["fds"] = [ev.FdInfo.from_list(f) for f in kw["fds"]]
        if "threads" in kw:
            kw["threads"] = {int(k): c for k, c in kw["threads"].items()}
        if "fd_kinds" in kw:
            kw["fd_kinds"] = tuple(kw["fd_kinds"])
        for key in ("peers", "outside"):
            if key in kw:
                kw[key] = {int(k): c for k, c in kw[key].items()}
        return cls(**kw)
    return decode


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
        ("start", lambda v: v is None or _num(v), "a finite number"),
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
