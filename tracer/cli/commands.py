"""The ``hangtrace`` command line: the group, and the one place where a command's end becomes an
exit status.

Contract: every command prints one clear line on stderr and exits non-zero on bad input (a
missing pid, no permission, a tool that is not installed, a corrupt trace), never a traceback
(``--debug`` or ``HANGTRACE_DEBUG=1`` adds the traceback of an internal error). ``--json``
prints exactly one JSON document on stdout. Exit statuses: README and ``main``'s help; how
stdout's troubles end: ``_ended``. A command returns its status and raises errors.py's
classes; ``_main`` turns an error into its line and exit status (errors.exit_code). The
console script goes through click's own ``main`` (shell completion: ``entry``), and may end
without the interpreter's teardown (``_exit_now``). Bare ``hangtrace`` prints its help.
"""
from __future__ import annotations

import atexit
import errno
import os
import sys
import threading
import traceback
from typing import List, Optional

import click

from .. import __version__
from ..errors import EXIT_USAGE, HangtraceError, StdoutFailed, exit_code
from ..outputs import guarded_stdout
from ..render.visible import visible
from .examples import epilog
from .options import quick_exit_allowed

__all__ = ["main", "run", "entry", "EXIT_STDOUT_GONE", "COMPLETE_VAR"]

EXIT_STDOUT_GONE = 141            # 128 + SIGPIPE: what a shell shows for `... | head`
COMPLETE_VAR = "_HANGTRACE_COMPLETE"
_debug = {"on": False}

def _exit_now(code: int) -> None:
    """End the process with ``code`` without the interpreter's teardown, once stdout and
    stderr are flushed and the exit handlers have run, for a command that called
    options.allow_quick_exit() (it closed every file it wrote): freeing a recording's objects
    one by one took 0.6-1.2 s after the report of an 800-thread tree on a busy 2-core machine.
    Returns when it may not (a thread that is not a daemon still runs, a flush fails)."""
    me = threading.current_thread()
    if any(t is not me and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - the ordinary exit says what went wrong
        return
    os._exit(code)


class StdoutGone(Exception):
    """The reader of stdout went away (EPIPE, or stdout closed while writing)."""


class _Interrupted(Exception):
    """Ctrl-C inside a command (kept from click's main, which would print a blank line)."""


class HangtraceGroup(click.Group):
    """The group; a command's EPIPE and Ctrl-C come out of it as this module's exceptions."""

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _Interrupted() from None
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.EBADF) and _stdout_broken(exc):
                raise StdoutGone() from None
            raise


def _stdout_broken(exc: OSError) -> bool:
    """An EPIPE is always the output's; an EBADF only when stdout itself is closed."""
    if exc.errno == errno.EPIPE:
        return True
    try:
        os.fstat(1)
        return False
    except OSError:
        return True


@click.group(cls=HangtraceGroup, invoke_without_command=True, epilog=epilog("hangtrace"),
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hangtrace")
@click.option("--debug", is_flag=True, envvar="HANGTRACE_DEBUG",
              help="Show the traceback of an internal error (also HANGTRACE_DEBUG=1).")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Tell whether a silent process tree is progressing, busy-waiting or deadlocked, and why.

    Exit status: 0 progressing or idle, 1 error, 2 usage, 3 busy-waiting, 4 deadlocked,
    5 exited, 6 blocked on the GPU, 7 unknown (part of the tree could not be observed or
    judged), 130 interrupted before the recording began, 141 stdout's reader went away.
    """
    _debug["on"] = _debug["on"] or debug
    if ctx.invoked_subcommand is None and not ctx.resilient_parsing:
        click.echo(ctx.get_help())
        ctx.exit(0)


@click.command(epilog=epilog("completion"))
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (click's, the same as
    _HANGTRACE_COMPLETE=SHELL_source hangtrace)."""
    from click.shell_completion import get_completion_class
    cls = get_completion_class(shell)
    assert cls is not None
    click.echo(cls(main, {}, "hangtrace", COMPLETE_VAR).source())


@click.command(epilog=epilog("schema"))
@click.argument("name", type=click.Choice(["report", "snapshot", "doctor"]))
def schema(name: str) -> None:
    """Print the JSON schema (draft 2020-12) of NAME's --json document: report (attach,
    analyze, watch, merge, cluster), snapshot or doctor; one file that resolves offline."""
    import json
    from ..resources import bundled_schema
    click.echo(json.dumps(bundled_schema(name), indent=1, ensure_ascii=False))


def _quiet_stdout() -> None:
    """stdout as /dev/null from here on: the interpreter's final flush must not fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def _open_missing_stdout() -> None:
    """A stdout closed before hangtrace started (``>&-``) is /dev/null (module doc)."""
    if sys.stdout is None:
        from ..outputs import note_stdout_closed
        note_stdout_closed()            # "-o -" must not say its trace went there
        sys.stdout = open(os.devnull, "w")


def _main(argv: Optional[List[str]]) -> int:
    """Run one command with its report going through the guarded stdout (module doc)."""
    args = list(sys.argv[1:] if argv is None else argv)
    _open_missing_stdout()
    plain = sys.stdout
    sys.stdout = guarded_stdout(plain)
    try:
        return _ended(args)
    finally:
        sys.stdout = plain


def _command_status(args: List[str]) -> int:
    """The status the command itself ends with (its return value or its sys.exit)."""
    try:
        rv = main.main(args, prog_name="hangtrace", complete_var=COMPLETE_VAR,
                       standalone_mode=False)
        return rv if isinstance(rv, int) else 0      # --help, --version: their exit code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)


def _ended(args: List[str]) -> int:
    """Run one command; every way it can end becomes an exit status here (module doc). The
    report is flushed here, so that a stdout that fails at the end fails as the command.
    Exit status (README): 0 progressing or idle, 1 error, 2 usage, 3 busy-waiting, 4 deadlocked, 5
    exited, 6 blocked on the GPU, 7 unknown (not everything could be observed or judged), 130
    interrupted before a recording began, 141 when the reader of stdout went away (``| head``:
    quietly, as a program killed by SIGPIPE). A closed stdout is as /dev/null: what would go there
    is dropped quietly. Every command writes its report through one standard output,
    outputs.guarded_stdout: a stdout that cannot be written (``> /dev/full``, an I/O error) is one
    line, "hangtrace: standard output: cannot write: ...", and status 1, after whatever the command
    saved (attach's trace) was saved; the rest of what would go there is dropped."""
    try:
        code = _command_status(args)
        sys.stdout.flush()
        return code
    except StdoutGone:
        _quiet_stdout()
        return EXIT_STDOUT_GONE
    except HangtraceError as exc:
        click.echo(f"hangtrace: {visible(exc)}", err=True)
        if isinstance(exc, StdoutFailed):
            _quiet_stdout()              # what is still buffered must not fail at exit
        return exit_code(exc)
    except click.UsageError as exc:    # bad options or arguments: one line, not click's four
        click.echo(f"hangtrace: {visible(exc.format_message())}", err=True)
        return EXIT_USAGE
    except click.ClickException as exc:
        click.echo(f"hangtrace: {visible(exc.format_message())}", err=True)
        return exc.exit_code
    except (click.Abort, _Interrupted, KeyboardInterrupt):   # Ctrl-C before a recording began
        click.echo("hangtrace: interrupted", err=True)
        return exit_code(KeyboardInterrupt())
    except BrokenPipeError:            # from click's own writing (help into | head)
        _quiet_stdout()
        return EXIT_STDOUT_GONE


def run(argv: Optional[List[str]] = None) -> int:
    """Entry for tests: run the CLI in-process and return its exit code."""
    return _main(argv)


def entry() -> None:
    """Console-script entry: no traceback reaches the user unless asked for (module doc).
    Shell completion: ``_HANGTRACE_COMPLETE=bash_source|zsh_source|fish_source hangtrace``, or
    ``hangtrace completion SHELL``."""
    _debug["on"] = os.environ.get("HANGTRACE_DEBUG", "") not in ("", "0")
    try:
        code = _main(None)
    except Exception as exc:  # the last line of defence: one line, exit 1
        if _debug["on"]:
            sys.stderr.write(visible(traceback.format_exc(), keep="\n"))
        click.echo(f"hangtrace: internal error: {type(exc).__name__}: {visible(exc)}"
                   + ("" if _debug["on"] else " (--debug shows where)"), err=True)
        code = 1
    if quick_exit_allowed():
        _exit_now(code)
    sys.exit(code)


def _add_commands() -> None:
    from .file_cmds import analyze, export, import_strace_cmd
    from .live_cmds import attach, demo, doctor, snapshot, watch
    from .nodes import cluster, merge
    for cmd in (attach, analyze, import_strace_cmd, snapshot, export, watch, doctor, demo,
                merge, cluster, schema, completion):     # this order: the synopsis's (cli/manpage.py)
        main.add_command(cmd)


_add_commands()
