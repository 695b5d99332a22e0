"""strace logs into events, named by what each file decodes: the line parser (``lines``,
``args``), syscalls into typed events (``decode``), fd tables followed without -y (``fdtable``),
processes and membership (``procs``), the log's architecture (``arch``), a stream of lines into
events with tid->pid and call pairing (``convert``, ``batch``; each thread's last call, cut or
interrupted by a signal: ``lastcall``; timestamps into seconds, -r deltas summed: ``times``),
and the importer of ``hangtrace import-strace`` (``importer``; ``parallel`` shards a large log over workers after
``scan``'s first pass; ``ff`` merges strace -ff sets; ``log`` opens and reads logs). The live
strace backend (record/backends/strace_backend.py) uses the same parser and converter.
May import: tracer.events, tracer.errors, tracer.linux, tracer.gpu, tracer.tracefile. The
names below load when first asked (``analyze`` imports only ``fastpath``).
"""
from importlib import import_module
from typing import Any

# convert.py's event classes, registered before the trace file's own (format.py): the order
# a trace header's schema lists them in, as when this package imported convert at once
from ..events import states, stacks  # noqa: F401,E401

__all__ = ["StraceConverter", "StraceLine", "parse_line", "parse_fd", "to_event"]
_HOME = {"StraceConverter": "convert", "StraceLine": "lines", "parse_line": "lines",
         "parse_fd": "decode", "to_event": "decode"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_HOME[name]}", __name__), name)
