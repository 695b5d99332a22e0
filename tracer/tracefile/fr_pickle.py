"""A pickle reader that builds plain data only, for PyTorch Flight Recorder dumps.

Contract: ``load_plain(data)`` -> the object a pickle describes, built from dicts, lists,
tuples, str, bytes, int, float, bool and None only; anything else raises ``UnsafePickle`` with
one line saying why, and nothing of the pickle ever runs (how: ``load_plain``'s docstring).
torch's C++ pickler writes dumps with EMPTY_DICT/SETITEMS, EMPTY_LIST/APPENDS, TUPLE2 and
scalars (torch/csrc/distributed/c10d/FlightRecorderDetail.hpp, ``pickle_str``): no globals.
"""
from __future__ import annotations

import io
import pickle
from typing import Any, List, Tuple

from ..linux import cancel

__all__ = ["load_plain", "UnsafePickle", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES"]

MAX_BYTES = 256 << 20
MAX_DEPTH = 64
MAX_NODES = 1 << 20          # a dump of 2,048 entries of 20 frames: about 250,000
_SCALARS = (str, bytes, int, float, bool, type(None))


class UnsafePickle(ValueError):
    """The pickle is not plain data, is too large or deep, or is damaged (one line)."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickle(f"refused: the pickle names {module}.{name} (a class or function: "
                           "a Flight Recorder dump holds plain data only)")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickle("refused: the pickle uses persistent ids")


def _check(obj: Any) -> None:
    todo: List[Tuple[Any, int]] = [(obj, 0)]
    seen = 0
    while todo:
        v, depth = todo.pop()
        seen += 1
        if seen % cancel.EVERY == 0:
            cancel.check()          # a stop inside the walk (linux/cancel.py)
        if seen > MAX_NODES:
            raise UnsafePickle(f"more than {MAX_NODES} values (shared references expand "
                               "beyond the bound)")
        if isinstance(v, _SCALARS):
            continue
        if depth >= MAX_DEPTH:
            raise UnsafePickle(f"nested deeper than {MAX_DEPTH} levels")
        if type(v) is dict:
            for k, x in v.items():
                if not isinstance(k, _SCALARS):
                    raise UnsafePickle(f"a dict key of type {type(k).__name__}")
                todo.append((x, depth + 1))
        elif type(v) in (list, tuple):
            todo.extend((x, depth + 1) for x in v)
        else:
            raise UnsafePickle(f"a value of type {type(v).__name__}")


def load_plain(data: bytes) -> Any:
    """The plain object of pickle ``data`` (module doc); UnsafePickle otherwise.
    ``find_class`` refuses every global (so REDUCE, NEWOBJ, INST, OBJ, BUILD of a class and the
    copyreg extension codes, which all go through it, cannot name a callable), and
    ``persistent_load`` refuses persistent ids; the input is bounded (``MAX_BYTES``) before
    anything is parsed; a length field larger than the data left is the unpickler's own "truncated"
    error (it never allocates the length); the result is walked once (iteratively, no recursion) to
    check every value's type, with a bound on depth (``MAX_DEPTH``) and on the values visited
    (``MAX_NODES``, which also stops a pickle whose memo references make a small file a huge
    tree)."""
    if len(data) > MAX_BYTES:
        raise UnsafePickle(f"{len(data)} bytes: larger than the {MAX_BYTES >> 20} MiB bound")
    try:
        obj = _PlainUnpickler(io.BytesIO(data)).load()
    except UnsafePickle:
        raise
    except RecursionError:
        raise UnsafePickle("nested deeper than the reader can follow") from None
    except MemoryError:
        raise UnsafePickle("too large to read") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, OverflowError, UnicodeDecodeError) as exc:
        text = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise UnsafePickle(f"not a readable pickle: {text}") from None
    _check(obj)
    return obj
