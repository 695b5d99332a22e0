"""strace logs into events, named by what each file decodes: the line parser (``lines``,
``args``), syscalls into typed events (``decode``), fd tables followed without -y (``fdtable``),
processes and membership (``procs``), the log's architecture (``arch``), a stream of lines into
events with tid->pid and call pairing (``convert``, ``batch``; each thread's last call, cut or
interrupted by a signal: ``lastcall``; timestamps into seconds, -r deltas summed: ``times``),
and the importer of ``hangtrace import-strace`` (``importer``; ``parallel`` shards a large log over workers after
``scan``'s first pass; ``ff`` merges strace -ff sets; ``log`` opens and reads logs). The live
strace backend (record/backends/strace_backend.py) uses the same parser and converter.
May import: tracer.events, tracer.errors, tracer.linux, tracer.gpu, tracer.tracefile.
"""
from .convert import StraceConverter
from .decode import parse_fd, to_event
from .lines import StraceLine, parse_line

__all__ = ["StraceConverter", "StraceLine", "parse_line", "parse_fd", "to_event"]
