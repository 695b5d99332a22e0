"""strace support: parse strace output (lines), decode syscalls into typed events (decode) and
turn a stream of lines into events with tid->pid and call pairing (convert).

Used by ``tracer.tracefile.strace_import`` (``hangtrace import-strace``) and by the live strace backend.
"""
from .convert import StraceConverter
from .decode import parse_fd, to_event
from .lines import StraceLine, parse_line

__all__ = ["StraceConverter", "StraceLine", "parse_line", "parse_fd", "to_event"]
