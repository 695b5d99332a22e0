"""Every file hangtrace writes is created here. hangtrace runs as root and writes at names
others can predict (``/tmp/x.htrace.gz``, the default trace name, watch's files), so nothing
is ever written through a link (at the output or on the way to it: ``a/link/x``) or into a
file that is already there.

Contract: a file is always created new (``O_CREAT|O_EXCL|O_NOFOLLOW``, mode 0600 whatever the
umask); an existing regular file is replaced only by renaming a new file over it, never
truncated. Each way out has one function: ``check_target``, ``replacing``, ``open_streamed``,
``create_fresh``, ``fresh_directory``, ``output_directory``, ``scratch_beside``,
``guarded_stdout``, ``refuse_links_on_the_way``; ``stdout_closed()``: standard output was closed
at start (``>&-``). Text is UTF-8 with errors="replace". This module imports only errors.py.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
from typing import IO, Iterator, Tuple, Union

from .errors import OutputError, StdoutFailed

__all__ = ["MODE", "FreshName", "check_target", "open_streamed", "create_fresh", "replacing",
           "guarded", "scratch_beside", "fresh_directory", "output_directory",
           "guarded_stdout", "STDOUT_NAME", "refuse_links_on_the_way", "note_stdout_closed",
           "stdout_closed"]

STDOUT_NAME = "standard output"
_STDOUT_OWN_RULES = (errno.EPIPE, errno.EBADF)   # the command line's rules (guarded_stdout)

MODE = 0o600
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MOST_FRESH_TRIES = 1000


class FreshName(str):
    """An output name hangtrace made up (not the user's): ``open_streamed`` never replaces a
    file there but takes the next free name (create_fresh)."""


def _what(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "a device or special file"


_STDOUT_CLOSED = [False]


def note_stdout_closed() -> None:
    """Standard output was closed when hangtrace started (cli/commands.py says so, once)."""
    _STDOUT_CLOSED[0] = True


def stdout_closed() -> bool:
    """Whether standard output was closed when hangtrace started (module doc)."""
    return _STDOUT_CLOSED[0]


def refuse_links_on_the_way(path: str, last: bool = False) -> None:
    """OutputError (one line) when a directory on the way to ``path`` (each component before its
    last, as ``path`` is written; the last one too with ``last``) is a symbolic link: the output
    would land wherever it points (``--output-dir a/link/x`` with ``link -> /etc``). Components
    that do not exist yet are made by hangtrace (real directories); the walk stops there."""
    names = [c for c in path.rstrip("/").split("/") if c not in ("", ".")]
    if not last:
        names = names[:-1]
    here = "/" if path.startswith("/") else ""
    for name in names:
        here = os.path.join(here, name) if here else name
        try:
            st = os.lstat(here)
        except OSError:          # missing (made later, for real) or unreadable (said later)
            return
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(f"{path}: {here} is a symbolic link: nothing written (hangtrace "
                              "writes no output through a link: give the path it points to)")


def check_target(path: str) -> bool:
    """What is at an output path, looked at first: True when a regular file is at ``path``,
    False when nothing is; a symbolic link, a directory, a FIFO, a device or a socket raises
    ``OutputError`` with one line saying what is there and that it is not written, and so does
    a link on the way to it (``refuse_links_on_the_way``)."""
    refuse_links_on_the_way(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise OutputError(f"{path}: cannot write here: {e.strerror}") from None
    if stat.S_ISREG(st.st_mode):
        return True
    raise OutputError(f"{path}: is {_what(st.st_mode)}, not a regular file: not written "
                      "(hangtrace writes no output through a link or into a special file)")


def _create(path: str) -> int:
    """A new file at ``path`` (O_EXCL|O_NOFOLLOW), mode 0600; FileExistsError when taken."""
    fd = os.open(path, _FLAGS, MODE)
    try:
        os.fchmod(fd, MODE)          # a umask such as 0277 would have left it read-only
    except OSError:
        os.close(fd)
        raise
    return fd


def _temp_beside(path: str) -> Tuple[int, str]:
    """A new file with a random name in ``path``'s directory: (fd, its path)."""
    directory, base = os.path.split(os.path.abspath(path))
    for _ in range(_MOST_FRESH_TRIES):
        tmp = os.path.join(directory, f".{base[:200]}.{os.urandom(6).hex()}.tmp")
        try:
            return _create(tmp), tmp
        except FileExistsError:
            continue
    raise OutputError(f"{path}: cannot create a temporary file beside it")


def _failed(path: str, e: OSError, what: str = "") -> OutputError:
    if e.errno == errno.ELOOP:
        return OutputError(f"{path}: is a symbolic link, not a regular file: not written "
                           "(hangtrace writes no output through a link or into a special "
                           "file)")
    return OutputError(f"{path}: cannot write{' ' + what if what else ''}: {e.strerror or e}")


def _binary(fd: int, path: str) -> IO[bytes]:
    f = os.fdopen(fd, "wb")
    f.raw.name = path                # type: ignore[attr-defined]
    return f


def create_fresh(path: str, text: bool = False, what: str = "") -> IO:
    """For names hangtrace makes up (``FreshName``: the default trace name in the working
    directory, watch's files): a new file at ``path`` or, when that name is taken, at the first
    free ``STEM-N.EXT`` (``a-2.htrace.gz``, ``a-3...``); it never replaces anything. The file
    object's ``name`` is where it is. ``text``: a text file (UTF-8,
    errors="replace") whose write errors are OutputError."""
    refuse_links_on_the_way(path)
    directory, base = os.path.split(path)
    stem, ext = _split_ext(base)
    for n in range(1, _MOST_FRESH_TRIES + 1):
        candidate = path if n == 1 else os.path.join(directory, f"{stem}-{n}{ext}")
        try:
            f = _binary(_create(candidate), candidate)
            if not text:
                return f
            return _Guarded(io.TextIOWrapper(f, encoding="utf-8", errors="replace",
                                             newline=""), candidate)  # type: ignore[arg-type]
        except FileExistsError:
            continue
        except OSError as e:
            raise _failed(candidate, e, what) from None
    raise OutputError(f"{path}: {_MOST_FRESH_TRIES} names like it are taken")


def _split_ext(base: str) -> Tuple[str, str]:
    """("hangtrace-1-x", ".htrace.gz"): the extension is everything from the first dot of
    the last two suffixes ("a.b.htrace.gz" -> "a.b", ".htrace.gz")."""
    root, ext = os.path.splitext(base)
    if ext == ".gz":
        root, ext2 = os.path.splitext(root)
        ext = ext2 + ext
    return root, ext


def open_streamed(path: str, what: str = "") -> IO[bytes]:
    """An output written as it goes (a trace while it records, a node's trace coming back from
    a launcher): the new file is renamed into place at once, before anything is written, so
    that a recording killed by SIGKILL is still at ``path``, readable up to where it stopped.
    OutputError when it cannot be (``what`` it was for is said: "the trace"). A ``FreshName``
    goes to ``create_fresh``."""
    if isinstance(path, FreshName):
        return create_fresh(path, what=what)
    check_target(path)
    try:
        fd, tmp = _temp_beside(path)
    except OSError as e:
        raise _failed(path, e, what) from None
    try:
        os.rename(tmp, path)
    except OSError as e:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _failed(path, e, what) from None
    return _binary(fd, path)


class _Guarded(io.TextIOBase):
    """A text (or binary) file whose write errors are OutputError with the output's name."""

    def __init__(self, f: IO, path: str) -> None:
        super().__init__()
        self._f, self._path = f, path

    def write(self, s):  # type: ignore[no-untyped-def,override]
        try:
            return self._f.write(s)
        except OSError as e:
            raise _failed(self._path, e) from None

    def flush(self) -> None:
        if self._f.closed:
            return
        try:
            self._f.flush()
        except OSError as e:
            raise _failed(self._path, e) from None

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def name(self) -> str:  # type: ignore[override]
        return self._path

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._f.close()
        except OSError as e:
            raise _failed(self._path, e) from None
        finally:
            super().close()


def guarded(f: IO, path: str) -> IO:
    """``f`` with its write errors raised as OutputError naming ``path``."""
    return _Guarded(f, path)  # type: ignore[return-value]


def _stdout_error(e: OSError) -> OSError | StdoutFailed:
    """What a failed write to standard output raises (guarded_stdout)."""
    if e.errno in _STDOUT_OWN_RULES:
        return e
    return StdoutFailed(f"{STDOUT_NAME}: cannot write: {e.strerror or e}")


class _GuardedStdout:
    """A standard output stream whose write errors are ``_stdout_error``'s (guarded_stdout);
    everything else is the stream's own."""

    def __init__(self, inner: IO) -> None:
        self._inner = inner
        self._buffer: "_GuardedStdout | None" = None

    def write(self, data):  # type: ignore[no-untyped-def]
        try:
            return self._inner.write(data)
        except OSError as e:
            raise _stdout_error(e) from None

    def writelines(self, lines) -> None:  # type: ignore[no-untyped-def]
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._inner.flush()
        except OSError as e:
            raise _stdout_error(e) from None

    @property
    def buffer(self) -> "_GuardedStdout":
        if self._buffer is None:
            self._buffer = _GuardedStdout(self._inner.buffer)
        return self._buffer

    @property
    def inner(self) -> IO:
        return self._inner

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._inner, name)


def guarded_stdout(stream: IO) -> IO:
    """Standard output as every command writes its report there (click's echo, rich's
    console, a binary export through ``.buffer``): the same ``stream``, whose write and flush
    errors are one line, ``StdoutFailed`` ("standard output: cannot write: No space left on
    device"), for ENOSPC, EIO and every error but two the command line has its own rule for:
    EPIPE (the reader went away: quietly, 141) and EBADF (stdout closed: dropped). The CLI
    installs it once, for every command; a stream already guarded is returned as it is."""
    if isinstance(stream, _GuardedStdout):
        return stream                # type: ignore[return-value]
    return _GuardedStdout(stream)  # type: ignore[return-value]


@contextlib.contextmanager
def replacing(path: str, text: bool = True) -> Iterator[IO]:
    """An output written whole (export -o, merge -o, watch's reports): the block writes a
    temporary file beside ``path`` (same directory, so the rename is atomic), renamed over
    ``path`` when the block ends without an error, removed otherwise: a command that fails (a
    bad input, a full disk) leaves ``path`` as it was. Write errors raise ``OutputError``."""
    check_target(path)
    try:
        fd, tmp = _temp_beside(path)
    except OSError as e:
        raise _failed(path, e) from None
    raw: Union[IO[str], IO[bytes]]
    raw = (open(fd, "w", encoding="utf-8", errors="replace", newline="") if text
           else os.fdopen(fd, "wb"))
    out = _Guarded(raw, path)
    done = False
    try:
        yield out
        out.close()
        check_target(path)           # what is there now is replaced by the rename, never
        os.rename(tmp, path)         # followed; a link planted meanwhile is refused
        done = True
    except OSError as e:
        raise _failed(path, e) from None
    finally:
        if not done:
            with contextlib.suppress(OSError):
                raw.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def fresh_directory(path: str) -> str:
    """A new directory (mode 0700) at ``path`` or at the first free ``PATH-N``, for a
    directory name hangtrace made up (cluster's default ``--output-dir``); its path."""
    refuse_links_on_the_way(path)
    for n in range(1, _MOST_FRESH_TRIES + 1):
        candidate = path if n == 1 else f"{path}-{n}"
        try:
            os.mkdir(candidate, 0o700)
            # whatever the umask; through an fd, never a name a link could replace meanwhile
            fd = os.open(candidate, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                os.fchmod(fd, 0o700)
            finally:
                os.close(fd)
            return candidate
        except FileExistsError:
            continue
        except OSError as e:
            raise _failed(candidate, e) from None
    raise OutputError(f"{path}: {_MOST_FRESH_TRIES} names like it are taken")


def output_directory(path: str) -> str:
    """``path``, a directory the user named for outputs (watch's and cluster's
    ``--output-dir``), made when missing; OutputError (one line) for a symbolic link there (the
    files would land in whatever it points to), something else than a directory, or one this
    user may not write into; and a link on the way to it (``refuse_links_on_the_way``)."""
    entry = path.rstrip("/") or "/"      # "LINK/" would be looked up through the link
    refuse_links_on_the_way(entry)
    try:
        st = os.lstat(entry)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(f"{path}: cannot write here: {e.strerror}") from None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        why = (" (hangtrace writes no output through a link: give the directory it points "
               "to)" if stat.S_ISLNK(st.st_mode) else "")
        raise OutputError(f"{path}: is {_what(st.st_mode)}, not a directory: nothing "
                          f"written{why}")
    if st is None:
        try:
            os.makedirs(entry, exist_ok=True)
        except OSError as e:
            raise OutputError(f"{path}: {e.strerror or e}") from None
    if not os.access(entry, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: not writable")
    return path


def scratch_beside(path: str) -> IO[bytes]:
    """A new temporary file (0600, random name) in ``path``'s directory for work on the way
    to ``path`` (the importer's rows); its ``name`` is its path; the caller removes it."""
    refuse_links_on_the_way(path)
    try:
        fd, tmp = _temp_beside(path)
    except OSError as e:
        raise _failed(path, e) from None
    return _binary(fd, tmp)
