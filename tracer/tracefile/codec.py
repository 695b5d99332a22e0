"""Trace rows to events and back, through msgspec: the event classes (events/) are msgspec
Structs, array-like and tagged, so a row ``[TAG, field, ...]`` is decoded straight into its
event, every field checked in C against its declared type (events/fields.py: 64-bit integers,
finite floats, enum-like fields from their set, list and dict shapes).

Contract:
- ``RowCodec(schema)`` decodes the rows a trace header's ``schema`` describes ({tag: field
  names}). ``block(data)`` turns a block of whole lines (bytes) into a list with, per line, the
  event or ``BAD`` (the line is not a row of a known tag with well-typed fields: corrupt).
  ``line(bytes)`` reads one line, ``row(list)`` checks one row already parsed as JSON (the
  header's processes). Rows whose tag
  has the writer's own field order (nearly every row) decode in one C call per block; a tag
  written with another field order (an older or newer writer) is decoded by name: its known
  fields checked as the current class declares them, unknown ones ignored.
- A line that msgspec cannot read as UTF-8 JSON (a lone surrogate written as ``\\udc80``,
  non-UTF-8 bytes) is read by Python's json (NaN, infinities and out-of-range numbers refused,
  as msgspec refuses them) and checked by the same types: both paths accept the same rows.
- ``encode_row(event)`` and ``encode_rows(events)`` give the row text (bytes, one line each);
  strings msgspec cannot write as UTF-8 (lone surrogates from surrogateescape decoding) are
  written as JSON escapes, so the trace keeps them and the reader gives them back.
- Any failure to decode is ``BAD``, never an exception: ``RecursionError`` (deep nesting) too.
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable, Dict, List, Tuple, Type, Union

import msgspec

from .. import events as ev

__all__ = ["BAD", "RowCodec", "encode_row", "encode_rows", "loads_strict"]

BAD = object()                  # the marker of a line that is no valid row
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError,
                 TypeError, UnicodeError)

_ENCODER = msgspec.json.Encoder()
_LEGACY_JSON = json.JSONEncoder(separators=(",", ":")).encode       # ASCII, \\uXXXX escapes


def encode_row(e: ev.Event) -> bytes:
    """One event as its trace line (newline included)."""
    try:
        return _ENCODER.encode(e) + b"\n"
    except UnicodeEncodeError:          # a lone surrogate: written escaped, read back as is
        return (_LEGACY_JSON(ev.event_to_row(e)) + "\n").encode("ascii")


def encode_rows(events: List[ev.Event]) -> bytes:
    """Many events as their trace lines, in one call."""
    try:
        return _ENCODER.encode_lines(events)
    except UnicodeEncodeError:
        return b"".join(map(encode_row, events))


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
    surrogates; big integers raise ValueError past Python's digit limit."""
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
            if name in types:
                self.known.append((f"f{i}", name))
        self.struct = msgspec.defstruct(f"{cls.__name__}Layout", fields, tag=cls.TAG,
                                        array_like=True, gc=False)

    def convert(self, s: Any) -> ev.Event:
        return self.cls(**{name: getattr(s, f) for f, name in self.known})


def _union(members: List[type]) -> Any:
    return Union[tuple(members)] if members else Any   # type: ignore[valid-type]


class RowCodec:
    """The decoder of one trace's rows (module doc)."""

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
        # fails there and is read line by line, the others need no look for it.
        body = [m for m in members if getattr(m, "TAG", None) != "end"
                and not (m in self._legacy and self._legacy[m].cls.TAG == "end")]
        self._type = _union(members)
        self._lines: Callable[[bytes], List[Any]] = msgspec.json.Decoder(
            _union(body)).decode_lines
        self._decode: Callable[[bytes], Any] = msgspec.json.Decoder(self._type).decode

    def block(self, data: bytes) -> Tuple[List[Any], bool]:
        """(the rows of ``data``: whole lines, a last one without its newline counts; whether
        it was read line by line). Read line by line, the list holds per line its event or
        BAD, end records included; else the events of the rows, none an end record. The fast
        read takes JSON's whitespace between rows as it comes: a blank line is no row there,
        and a row cut over two lines passes as one."""
        try:
            items = self._lines(data)
        except DECODE_ERRORS:
            lines = data.split(b"\n")
            if lines[-1] == b"":
                lines.pop()
            return [self.line(x) for x in lines], True
        if self._legacy:
            items = [self._from_legacy(x) for x in items]
            return items, any(x is BAD for x in items)
        return items, False

    def line(self, line: bytes) -> Any:
        """One line (bytes, without its newline): its event, or BAD."""
        try:
            return self._from_legacy(self._decode(line))
        except DECODE_ERRORS:
            pass
        try:                        # lone surrogates, non-UTF-8 bytes: Python's json
            return self.row(loads_strict(line.decode("utf-8", "surrogateescape")))
        except DECODE_ERRORS:
            return BAD

    def row(self, row: Any) -> Any:
        """One row parsed as JSON, checked and made its event, or BAD."""
        try:
            return self._from_legacy(msgspec.convert(row, self._type, str_keys=True))
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

