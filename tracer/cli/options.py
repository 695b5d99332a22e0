"""What the commands share: option types, the pid options, where output goes and how reports are
printed there.

Contract:
- ``FiniteFloat(lo, hi)``: a float in [lo, hi], NaN and infinity refused. ``PidList``: one
  ``-p/--pid`` value (strace's forms); ``pid_option(help)``, ``container_options`` (--cgroup,
  --container), ``all_pids(positional, given)``.
- Completion: ``FILE``, ``DIR``, ``complete_from``, ``complete_scenario``; ``color_option``: --color.
- ``report_console(err)``: the rich Console a report is printed on (wrapped on a terminal only).
- ``tell(line)``: "hangtrace: LINE" on stderr through render/visible.py's ``visible``.
- ``show(report, as_json, verbose, err)``: print a report (JSON: one document) and return its
  verdict's status, for the command to return (cli/commands.py makes it the exit status).
"""
from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Sequence

import click

from ..errors import shown
from ..render.visible import visible

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console       # rich loads when a report is shown (30 ms)

__all__ = ["FiniteFloat", "PidList", "pid_option", "container_options", "all_pids", "color_option",
           "report_console", "show", "tell",
           "is_terminal", "FILE", "DIR", "complete_from", "complete_scenario"]

_PID_DIGITS = 10                  # pid_max is at most 2**22; 10 digits bound int() anyway
# strace's -p: one comma (with blanks around it, or not) or blanks (spaces, tabs, newlines);
# "1,,2" is still a usage error (an empty pid between two commas)
_PID_SEPARATORS = re.compile(r"\s*,\s*|\s+")


FILE = click.Path()                              # completes file names; checks nothing
DIR = click.Path(file_okay=False, exists=False)   # completes directory names


def complete_from(values: Sequence[str]) -> Callable[..., List[Any]]:
    """A ``shell_complete`` offering the ``values`` that start with what was typed.
    Without making the option a Choice (its message for a bad value stays hangtrace's): ``export
    -f``'s formats. The others: ``FILE`` is the ``type`` of a parameter that names a file
    (click.Path, which makes no check here: hangtrace's own errors say what is wrong with a path),
    ``DIR.shell_complete`` the completion of one that names a directory (its type stays a string,
    so that its checks stay hangtrace's), ``complete_scenario`` the bundled scenarios of
    ``demo``."""
    def complete(ctx, param, incomplete):  # type: ignore[no-untyped-def]
        from click.shell_completion import CompletionItem
        return [CompletionItem(v) for v in values if v.startswith(incomplete)]
    return complete


def complete_scenario(ctx, param, incomplete):  # type: ignore[no-untyped-def]
    """``demo``'s scenarios (record/demo.scenario_names) that start with what was typed."""
    from ..record.demo import scenario_names
    return complete_from(scenario_names())(ctx, param, incomplete)


class FiniteFloat(click.ParamType):
    """A float in [lo, hi]; NaN and infinity are refused (click's FloatRange lets NaN by)."""
    name = "float"

    def __init__(self, lo: float, hi: float = math.inf) -> None:
        self.lo, self.hi = lo, hi

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{shown(value)} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{shown(value)} is not a finite number", param, ctx)
        if not self.lo <= x <= self.hi:
            bound = f"between {self.lo:g} and {self.hi:g}" if math.isfinite(self.hi) else \
                f"at least {self.lo:g}"
            self.fail(f"{value} is not {bound}", param, ctx)
        return x


def parse_pid(text: str) -> Optional[int]:
    """A pid from its decimal text, or None when it is not one (module doc)."""
    t = text.strip()
    if not t or len(t) > _PID_DIGITS or not (t.isascii() and t.isdecimal()):
        return None
    pid = int(t)
    return pid if pid > 0 else None


class PidList(click.ParamType):
    """``PID``, ``PID,PID,...`` or ``"PID PID ..."`` (module doc). Shell completion offers the running processes'
    pids, with their names as the help zsh and fish show.
    Separated by commas and/or whitespace (``-p 1,2 -p 3``, ``-p "$(pidof x)"``); each an ASCII
    decimal of at most 10 digits (``²`` or ``1e3`` is a usage error, never an exception later)."""
    name = "pid"

    def shell_complete(self, ctx, param, incomplete):  # type: ignore[no-untyped-def]
        from click.shell_completion import CompletionItem
        from ..linux.processes import listing
        parts = _PID_SEPARATORS.split(incomplete)
        last = parts[-1]
        prefix = incomplete[:len(incomplete) - len(last)]
        return [CompletionItem(f"{prefix}{pid}", help=name) for pid, name in listing()
                if str(pid).startswith(last)]

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        if isinstance(value, list):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]
        out: List[int] = []
        for part in _PID_SEPARATORS.split(str(value).strip()):
            pid = parse_pid(part)
            if pid is None:
                self.fail(f"{shown(part)} is not a pid (a positive decimal number)", param, ctx)
            out.append(pid)
        return out


def _set_colour(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from ..render.colour import set_mode
    set_mode(value)
    return value


# --color, as ls and grep take it: "always" keeps the colours through a pipe (less -R).
color_option = click.option(
    "--color", "--colour", type=click.Choice(["auto", "always", "never"]), default="auto",
    show_default=True, expose_value=False, is_eager=True, callback=_set_colour,
    help="Colours: on a terminal unless NO_COLOR is set (auto), also through a pipe for "
         "less -R (always), or none (never).")


def pid_option(help_text: str):  # type: ignore[no-untyped-def]
    return click.option("-p", "--pid", "pid_lists", multiple=True, type=PidList(),
                        metavar="PID[,PID...]", help=help_text)


def container_options(verb: str):  # type: ignore[no-untyped-def]
    """``--cgroup PATH`` and ``--container ID``: select every process of a cgroup or a
    container (linux/containers.py), as ``--name`` selects by name; ``verb``: "attach to",
    "watch", "look at"."""
    def apply(f):  # type: ignore[no-untyped-def]
        f = click.option("--container", "container", metavar="ID",
                         help=f"Also {verb} every process of the container whose id starts "
                         "with ID (at least 4 hex digits; docker://ID too).")(f)
        return click.option("--cgroup", "cgroup", metavar="PATH",
                            help=f"Also {verb} every process of this cgroup and the cgroups "
                            "below it (a path as /proc/PID/cgroup shows it, or under "
                            "/sys/fs/cgroup).")(f)
    return apply


def all_pids(positional: Iterable[List[int]], given: Iterable[List[int]]) -> List[int]:
    """Every pid of the positional arguments and of -p/--pid, in order, each once."""
    out: List[int] = []
    for group in list(positional) + list(given):
        for pid in group:
            if pid not in out:
                out.append(pid)
    return out


def is_terminal(stream) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``stream`` is a terminal (False for a closed or missing stream)."""
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False


def report_console(err: bool = False, file=None) -> Console:  # type: ignore[no-untyped-def]
    """The Console a report goes to (render/console.py's rule).
    On a terminal it wraps to the terminal's width; anywhere else (a pipe, a file) it never wraps a
    line, so that grep over a saved report finds whole lines."""
    from ..render.console import report_console as console_for
    return console_for(file=file, stderr=err)


def tell(line: str) -> None:
    """``line`` on stderr as "hangtrace: LINE", made visible (module doc)."""
    click.echo(f"hangtrace: {visible(line)}", err=True)


_quick = {"exit": False}


def allow_quick_exit() -> None:
    """The running command closed every file it wrote: the console script may end without
    the interpreter's teardown (commands.py's module doc)."""
    _quick["exit"] = True


def quick_exit_allowed() -> bool:
    return _quick["exit"]


def show(report, as_json: bool, verbose: bool = False,  # type: ignore[no-untyped-def]
         err: bool = False) -> int:
    from ..render.console import render_report
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2), err=err)
    else:
        render_report(report, report_console(err), verbose=verbose)
    return int(report.exit_code)


def pids_text(pids: Sequence[int]) -> str:
    return ", ".join(map(str, pids))
