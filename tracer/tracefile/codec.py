"""Trace rows to events and back, through msgspec: a row ``[TAG, field, ...]`` is decoded straight
into its event (events/: array-like tagged msgspec Structs), each field checked in C (``RowCodec``).

Contract:
- ``RowCodec(schema)`` decodes the rows a trace header's ``schema`` describes ({tag: [field
  names]}): ``block(data)`` a block of whole lines (bytes) -> (its rows, whether it was read line
  by line); ``line(data)`` one line; ``row(value)`` one row already parsed as JSON (the
  header's processes); ``current(tags)`` the decoder of those tags' rows in the current field
  order (csrc/rows.c). A row that cannot be read is ``BAD``: no decoding failure escapes.
- ``encode_row(event)``, ``encode_rows(events)``: row text (bytes, a line each); ``header_line``
  and ``end_line``: a trace's first and last lines (the one place writer and importer take them).
- ``refused(event)``: what the reader would refuse in its row, else None (the writer's check).
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable, Dict, List, Optional, Tuple, Type, Union

import msgspec

from .. import events as ev

__all__ = ["BAD", "RowCodec", "encode_row", "encode_rows", "end_line", "header_line",
           "loads_strict", "refused"]

BAD = object()                  # the marker of a line that is no valid row
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError,
                 TypeError, UnicodeError, OverflowError)

_ENCODER = msgspec.json.Encoder()
_ASCII_JSON = json.JSONEncoder(separators=(",", ":")).encode       # \uXXXX escapes


def encode_row(e: ev.Event) -> bytes:
    """One event as its trace line (newline included).
    A string msgspec cannot write as UTF-8 (a lone surrogate: bytes of a log that were not UTF-8,
    decoded with surrogateescape) makes that row plain-ASCII JSON with escapes, which the reader
    gives back as it was."""
    try:
        return _ENCODER.encode(e) + b"\n"
    except UnicodeEncodeError:          # a lone surrogate: written escaped, read back as is
        return (_ASCII_JSON(ev.event_to_row(e)) + "\n").encode("ascii")


def encode_rows(events: List[ev.Event]) -> bytes:
    """Many events as their trace lines, in one call."""
    try:
        return _ENCODER.encode_lines(events)
    except UnicodeEncodeError:
        return b"".join(map(encode_row, events))


def refused(e: ev.Event) -> Optional[str]:
    """Why the reader would refuse ``e``'s row (msgspec's check of its type), else None."""
    try:
        msgspec.convert(msgspec.to_builtins(e), type(e))
    except DECODE_ERRORS as exc:
        return str(exc)
    return None


def header_line(header: Dict[str, Any]) -> bytes:
    """A trace's first line: its header object (format.py says what it holds)."""
    return json.dumps(header, separators=(",", ":")).encode("utf-8", "surrogateescape") + b"\n"


def end_line(start: float, events: int, reason: str, ts: float,
             window_end: Optional[float] = None) -> bytes:
    """A trace's last line: the end record of a recording that started at ``start`` and holds
    ``events`` events, closed at ``ts`` for ``reason``, its window closed at ``window_end``
    (None: at ``ts``); ``duration`` is the window's."""
    closed = ts if window_end is None else min(window_end, ts)
    return encode_row(ev.RecordingEnd(ts=ts, reason=reason, duration=max(0.0, closed - start),
                                      events=events,
                                      window_end=None if window_end is None else closed))


def _refuse(text: str) -> Any:
    raise ValueError(f"not a finite number: {text[:20]}")


def _finite(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {text[:20]}")
    return x


_STRICT = json.JSONDecoder(parse_constant=_refuse, parse_float=_finite)


def loads_strict(text: str) -> Any:
    """json.loads that refuses what msgspec refuses (NaN, Infinity, 1e999) and keeps lone
    surrogates."""
    return _STRICT.decode(text)


class _Legacy:
    """Rows of one tag written with another field order: a positional Struct whose fields
    are f0..fN (any text may name a field in a header), typed as the current class types the
    names it knows (Any for the others), turned into the current class by name."""

    def __init__(self, cls: Type[ev.Event], names: List[str]) -> None:
        types = {f.name: f.type for f in msgspec.structs.fields(cls)}
        self.cls = cls
        self.known: List[Tuple[str, str]] = []          # (struct field, event field)
        fields = []
        for i, name in enumerate(names):
            fields.append((f"f{i}", types.get(name, Any)))
            if name in types and all(name != known for _, known in self.known):
                self.known.append((f"f{i}", name))      # a name given twice: the first
        self.struct = msgspec.defstruct(f"{cls.__name__}Layout", fields, tag=cls.TAG,
                                        array_like=True, gc=False,
                                        forbid_unknown_fields=True)

    def convert(self, s: Any) -> ev.Event:
        return self.cls(**{name: getattr(s, f) for f, name in self.known})


def _decoder(members: List[type]) -> Optional[Any]:
    """The msgspec decoder of a row of any of ``members`` (None when there are none: Union[()]
    would be Any, which takes any JSON as it is)."""
    if not members:
        return None
    return msgspec.json.Decoder(Union[tuple(members)])    # type: ignore[valid-type]


class RowCodec:
    """The decoder of one trace's rows (module doc). Each field is checked in C against its
    declared type: ints are ints, never bools; floats are finite; strings, lists, tuples and dicts
    hold what the class says, dict keys of an ``int`` map are decimal text. Rows whose tag has the
    writer's own field order (nearly every row) are decoded in one call per block; a block where
    that fails (a bad line, an end record, a line of a tag the schema does not know) is read line
    by line, each line its event or ``BAD``. Read at once, JSON's whitespace is taken as it comes:
    a blank line is no row (nor a bad one), and a row a newline cuts in two whose halves are JSON
    together is one row. A tag written with another field order (an older or newer writer) is
    decoded by name: the fields the current class knows are checked as it declares them, the others
    are ignored, a field it requires and the row lacks makes the row BAD. A line msgspec cannot
    read (a lone surrogate written as ``\\udc80``, bytes that are not UTF-8) is read by Python's
    json, refusing what msgspec refuses (NaN, infinities, numbers out of range), and checked by the
    same types: both accept the same rows."""

    def __init__(self, schema: Dict[str, List[str]]) -> None:
        members: List[type] = []
        self._legacy: Dict[type, _Legacy] = {}
        for tag, names in schema.items():
            cls = ev.EVENT_CLASSES.get(tag)
            if cls is None or type(names) is not list:
                continue
            if names == ev.field_names(cls):
                members.append(cls)
                continue
            legacy = _Legacy(cls, names)
            self._legacy[legacy.struct] = legacy
            members.append(legacy.struct)
        # The end record is left out of the block decoder: the block that holds it (the last)
        # fails there and is read line by line; no other block needs a look for it.
        body = _decoder([m for m in members if m.__struct_config__.tag != "end"])
        whole = _decoder(members)
        self._type: Any = Union[tuple(members)] if members else None  # type: ignore
        self._current = {m.__struct_config__.tag for m in members if m not in self._legacy}
        self._lines: Optional[Callable[[bytes], List[Any]]] = body and body.decode_lines
        self._decode: Optional[Callable[[bytes], Any]] = whole and whole.decode

    def current(self, tags: Tuple[str, ...]) -> Optional[Callable[[bytes], Any]]:
        """The decoder of a whole row (line -> its event) when every tag of ``tags`` is
        written in the current field order (no legacy layout), else None: what a reader of
        such rows in place (csrc/rows.c) makes an event with."""
        return self._decode if self._decode is not None and set(tags) <= self._current else None

    def block(self, data: bytes) -> Tuple[List[Any], bool]:
        """(the rows of ``data``, whether it was read line by line: then the list holds per
        line its event or BAD, end records included; else it holds the block's events, none
        an end record)."""
        try:
            items = self._lines(data) if self._lines is not None else None
        except DECODE_ERRORS:
            items = None
        if items is not None:
            if self._legacy:
                items = [self._from_legacy(x) for x in items]
                if any(x is BAD for x in items):
                    return items, True
            return items, False
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        return [self.line(x) for x in lines], True

    def line(self, line: bytes) -> Any:
        """One line (bytes, without its newline): its event, or BAD."""
        if self._decode is None:
            return BAD
        try:
            return self._from_legacy(self._decode(line))
        except DECODE_ERRORS:
            pass
        try:                        # lone surrogates, non-UTF-8 bytes: Python's json
            return self.row(loads_strict(line.decode("utf-8", "surrogateescape")))
        except DECODE_ERRORS:
            return BAD

    def row(self, row: Any) -> Any:
        """One row parsed as JSON, checked and made its event, or BAD. It is checked as the
        line it would be (so a float that JSON cannot hold is refused there); one holding a
        lone surrogate is converted as it is."""
        if self._decode is None:
            return BAD
        try:
            try:
                text = _ENCODER.encode(row)
            except UnicodeEncodeError:
                return self._from_legacy(msgspec.convert(row, self._type, str_keys=True))
            if b"null" in text and _non_finite(row):
                return BAD
            return self._from_legacy(self._decode(text))
        except DECODE_ERRORS:
            return BAD

    def _from_legacy(self, x: Any) -> Any:
        legacy = self._legacy.get(type(x))
        if legacy is None:
            return x
        try:
            return legacy.convert(x)
        except DECODE_ERRORS:           # a field the current class requires is missing
            return BAD


def _non_finite(v: Any, depth: int = 0) -> bool:
    """Whether a parsed JSON value holds a float that is not finite (msgspec writes those as
    null, which an Optional field would take for "not known")."""
    if type(v) is float:
        return not math.isfinite(v)
    if depth > 64:
        return False
    if type(v) is list:
        return any(_non_finite(x, depth + 1) for x in v)
    if type(v) is dict:
        return any(_non_finite(x, depth + 1) for x in v.values())
    return False
