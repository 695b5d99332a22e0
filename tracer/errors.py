"""The errors hangtrace reports to its user, and the one place they become exit statuses.

Contract:
- Every failure a user should see as one line on stderr (bad input, a missing process, no
  permission, a tool that is not installed, a corrupt trace, an unwritable output) is raised
  as a ``HangtraceError`` subclass whose message is that line (without the "hangtrace: "
  prefix). Code that raises picks the class for what happened; it never picks an exit status.
- A value shown in a message goes through ``shown()``: its repr, cut to 80 characters.
- ``exit_code(exc)`` maps an error to the command's exit status; the CLI calls it and nothing
  else decides (the statuses: its docstring).
- This module imports nothing from the package: every layer may raise these.
"""
from __future__ import annotations

__all__ = ["HangtraceError", "UsageError", "TargetGone", "AccessDenied", "ToolMissing",
           "BadInput", "CorruptTrace", "NotATrace", "OutputError", "StdoutFailed",
           "BackendFailed",
           "exit_code", "shown", "SHOWN_MAX", "EXIT_ERROR", "EXIT_USAGE", "EXIT_INTERRUPTED"]

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class HangtraceError(Exception):
    """Base: the message is one line for the user."""


class UsageError(HangtraceError):
    """The command line asks for something that cannot be done as given (no target, NaN
    duration, pid 1 without --force)."""


class TargetGone(HangtraceError):
    """The process asked for does not exist (or exited before it could be looked at)."""


class AccessDenied(HangtraceError):
    """The process or file exists but this user may not read or trace it."""


class ToolMissing(HangtraceError):
    """A tool or library a backend needs is not installed or not usable here."""


class BadInput(HangtraceError):
    """An input file that cannot be read as asked: missing, a directory, a device,
    unreadable."""


class CorruptTrace(BadInput):
    """A trace file whose content is not a valid trace (bad header, a line over the limit)."""


class NotATrace(CorruptTrace):
    """A file that is not a hangtrace trace at all (``analyze`` then tries it as an strace
    log)."""


class OutputError(HangtraceError):
    """The output file cannot be created or written."""


class StdoutFailed(OutputError):
    """Standard output could not be written (a full disk, an I/O error): the report is lost,
    what the command saved to files is not. A reader that went away (EPIPE) is not this: it
    ends the command quietly (cli/commands.py)."""


class BackendFailed(HangtraceError):
    """A recording backend failed to start (its tool ran but could not attach or load)."""


# A value an error line shows (a header field, an option, a pattern) is cut to this many
# characters: one bad header value made a 1 MB "line".
SHOWN_MAX = 80


def shown(value: object) -> str:
    """``repr(value)`` for an error line, cut to SHOWN_MAX characters (then "...")."""
    text = repr(value)
    return text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX - 3] + "..."


def exit_code(exc: BaseException) -> int:
    """The exit status for an error that ends a command (module doc). Verdict statuses (0
    progressing/idle, 3 busy-waiting, 4 deadlocked, 5 exited, 6 blocked, 7 unknown) live beside the
    verdicts in report.py; errors are 1, usage 2, and an interrupt before a recording could start
    is 130 (128 + SIGINT, as shells report it)."""
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_ERROR
