"""Python stacks of traced processes, through ``py-spy dump`` (optional dependency).

Contract:
- ``py_stacks_probe(pids, analyzer)`` is a session ``EndProbe``: after the backends detached,
  one ``py-spy dump --json --nonblocking`` per running Python process (``is_python_process``;
  never paused) gives one ``PyStack`` per thread; a stack not taken is a ``PyStack`` with
  ``error`` (its docstring), never an exception. ``take_stacks(pid)``: one pid (snapshot).
- ``native_stacks_probe`` (``native=True``, attach/snapshot ``--native``): ``py-spy dump
  --native``, which pauses the process while it unwinds (never the default; ``take_stacks``).
- When a dump says a thread holds the GIL, a ``PythonRuntime`` event says where the GIL lies
  (probes/pyruntime.py), so that the analysis can tell GIL waits from other futex waits.
- Which py-spy: ``find_py_spy``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any, Dict, Iterator, List, Optional

from .. import events as ev
from ..events.stacks import NativeStack
from ..linux import cancel
from ..linux.pidns import inner_tids

__all__ = ["find_py_spy", "is_python_process", "take_stacks", "py_stacks_probe",
           "native_stacks_probe", "format_frame", "format_native", "NOT_INSTALLED"]

NOT_INSTALLED = "py-spy is not installed (pip install 'hangtrace[stacks]')"
_PY_EXE = re.compile(r"^python[\d.]*(-dbg)?$")
_TIMEOUT_S = 10.0
MAX_PROCESSES = 128       # Python processes whose stacks one recording takes
BUDGET_S = 15.0           # for all of them
MUST_TAKE = 4             # deciding processes whose stacks no budget drops (py_stacks_probe)


def find_py_spy() -> Optional[str]:
    """Path of the py-spy binary to use, or None.
    ``$HANGTRACE_PY_SPY`` if set (an empty value means "none"), else ``py-spy`` on PATH, else next
    to the running interpreter (a virtual environment's bin/)."""
    env = os.environ.get("HANGTRACE_PY_SPY")
    if env is not None:
        return env if env and os.access(env, os.X_OK) else None
    found = shutil.which("py-spy")
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else None


def is_python_process(pid: int) -> bool:
    """True for a CPython process (by executable name, or by a mapped libpython).
    That is: its executable is named python*, or it maps libpython."""
    try:
        if _PY_EXE.match(os.path.basename(os.readlink(f"/proc/{pid}/exe"))):
            return True
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any("libpython" in line for line in f)
    except OSError:
        return False


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rindex(")") + 2:][:1] not in ("Z", "X")


def format_frame(frame: Dict[str, Any]) -> str:
    """One py-spy frame as "func (file:line)"."""
    name = frame.get("name") or "?"
    fname = frame.get("short_filename") or os.path.basename(frame.get("filename") or "?")
    line = frame.get("line")
    return f"{name} ({fname}:{line})" if line else f"{name} ({fname})"


def _why(stderr: str) -> str:
    text = stderr.strip()
    low = text.lower()
    if "permission denied" in low or "operation not permitted" in low:
        return "permission denied (py-spy needs root or CAP_SYS_PTRACE over the target)"
    if "no such process" in low:
        return "the process exited before its stack was taken"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")
    return f"py-spy failed: {first[:160]}"


def format_native(frame: Dict[str, Any]) -> str:
    """One py-spy --native frame: "func (lib.so)" for native code, else format_frame's."""
    if not frame.get("module"):
        return format_frame(frame)
    name = str(frame.get("name") or "?")
    if len(name) > 160:            # C++ template instantiations run to kilobytes
        name = name[:157] + "..."
    return f"{name} ({frame.get('short_filename') or '?'})"


def take_stacks(pid: int, py_spy: Optional[str] = None, timeout: float = _TIMEOUT_S,
                native: bool = False) -> List[ev.Event]:
    """``PyStack`` events for every thread of ``pid`` (or one failure event), with
    ``NativeStack`` events when ``native`` and a ``PythonRuntime`` when a thread holds the GIL.

    With ``native=True`` (attach/snapshot ``--native``): ``py-spy dump --native`` instead, which
    pauses the process while it unwinds (never the default); it gives a ``NativeStack`` per thread
    besides its ``PyStack`` (whose frames stay the Python ones). Processes py-spy cannot read
    natively (not Python, py-spy missing or refused) get a stack scan of their blocked threads
    instead (probes/native.py), never a pause."""
    now = time.time()
    exe = py_spy or find_py_spy()
    if exe is None:
        return [ev.PyStack(ts=now, pid=pid, tid=0, error=NOT_INSTALLED)]
    how = ["--native"] if native else ["--nonblocking"]
    try:
        p = _dump([exe, "dump", "--pid", str(pid), "--json", *how], timeout)
    except subprocess.TimeoutExpired:
        return [ev.PyStack(ts=now, pid=pid, tid=0, error=f"py-spy took more than {timeout:g} s")]
    except OSError as exc:
        return [ev.PyStack(ts=now, pid=pid, tid=0, error=f"py-spy could not run: {exc}")]
    except cancel.Cancelled as exc:
        return [ev.PyStack(ts=now, pid=pid, tid=0, error=f"not taken: {exc}")]
    if p.returncode != 0:
        return [ev.PyStack(ts=now, pid=pid, tid=0, error=_why(p.stderr))]
    try:
        threads = json.loads(p.stdout)
    except ValueError:
        return [ev.PyStack(ts=now, pid=pid, tid=0, error="py-spy printed no JSON")]
    out: List[ev.Event] = []
    # a process in a pid namespace below hangtrace's (a container's, from the host): CPython
    # and so py-spy know its threads by their tids there
    from_ns = inner_tids(pid)
    for t in threads if isinstance(threads, list) else []:
        tid = t.get("os_thread_id")
        if not isinstance(tid, int):
            continue   # py-spy could not map the pthread id to a kernel tid
        tid = from_ns.get(tid, tid) if from_ns else tid
        frames = [f for f in t.get("frames") or [] if isinstance(f, dict)]
        py = [f for f in frames if not f.get("module")]       # native ones name their file
        out.append(ev.PyStack(
            ts=now, pid=pid if from_ns else int(t.get("pid") or pid), tid=tid,
            thread_name=str(t.get("thread_name") or ""),
            frames=[format_frame(f) for f in py], active=t.get("active"),
            owns_gil=t.get("owns_gil"), files=[str(f.get("filename") or "") for f in py]))
        if native:
            out.append(NativeStack(ts=now, pid=pid, tid=tid, source="py-spy",
                                   frames=[format_native(f) for f in frames],
                                   libs=[str(f.get("module") or "") for f in frames]))
    if any(isinstance(e, ev.PyStack) and e.owns_gil for e in out):
        from .probes.pyruntime import python_runtime
        out.append(python_runtime(pid, now))
    return out


def _dump(argv: List[str], timeout: float) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, timeout=)`` whose wait looks at linux/cancel.py's stop every
    ``cancel.SLICE_S``: py-spy is killed (its ptrace, with ``--native``, ends with it) on a
    stop (``Cancelled``) or at ``timeout`` (TimeoutExpired), and reaped either way."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    until = time.monotonic() + timeout
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=max(0.0, min(cancel.SLICE_S,
                                                             until - time.monotonic())))
                return subprocess.CompletedProcess(argv, proc.returncode, out, err)
            except subprocess.TimeoutExpired:
                cancel.check()
                if time.monotonic() >= until:
                    raise subprocess.TimeoutExpired(argv, timeout) from None
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate()


def py_stacks_probe(pids: List[int], analyzer: object = None,
                    native: bool = False) -> Iterator[ev.Event]:
    """EndProbe (session.py): stacks of every running Python process among ``pids`` (and with
    ``native``, the native frames of every process: ``take_stacks``).

    Threads are matched to the kernel's by py-spy's ``os_thread_id``. It never raises for one
    process: a stack that could not be taken becomes a ``PyStack`` with ``tid`` 0 and ``error``
    (py-spy not installed, permission denied, not a CPython it can read), which the report turns
    into one note line (analysis/accumulate/stacks.py's ``failure_notes``). At most
    ``MAX_PROCESSES`` processes and ``BUDGET_S`` seconds in all, and none after the probe's
    deadline (probe_run.probe_deadline: its budget counts from the window's end): the others
    get such a PyStack too. The processes are taken deciding ones first (probes/deciding.py:
    CPU time gained, then state D), and the first ``MUST_TAKE`` of those are waited for
    whatever the deadline (py-spy's own time, ``_TIMEOUT_S``, bounds them), so that a cut
    never drops the root cause's stack. The events come as each process's dump does (an
    iterator: what a recording that cannot wait longer takes is what came)."""
    from .probes.deciding import deciding_split
    running = [p for p in pids if _running(p)]
    targets, leading = deciding_split([p for p in running if is_python_process(p)])
    exe = find_py_spy()
    got: List[ev.Event] = []
    if exe is None:
        now = time.time()
        got = [ev.PyStack(ts=now, pid=p, tid=0, error=NOT_INSTALLED) for p in targets]
        yield from got
    elif targets:
        for e in _bounded_stacks(targets, exe, native, min(leading, MUST_TAKE)):
            got.append(e)
            yield e
    if native:
        from .probes.native import scan_uncovered
        yield from scan_uncovered(running, got, analyzer)


def _workers(n: int) -> int:
    """py-spy dumps at once: two per CPU, at most 8 (a dump is CPU work: many more at once
    than CPUs only makes the first one, the deciding process's, finish later)."""
    return max(1, min(8, n, 2 * (os.cpu_count() or 1)))


def _bounded_stacks(targets: List[int], exe: str, native: bool, must: int = 0
                    ) -> Iterator[ev.Event]:
    """take_stacks of at most ``MAX_PROCESSES`` of ``targets``, started in their order, within
    ``BUDGET_S`` in all and by the probe's deadline (py_stacks_probe), but the first ``must``
    (the deciding processes) each within py-spy's own time (``_TIMEOUT_S``) whatever the
    deadline; each process's events as its dump ends; then a PyStack for each of the others
    that says it was left out (a tree of thousands of Python processes must not hold the
    recording's end for minutes)."""
    from .probe_run import probe_deadline
    now, began = time.time(), time.monotonic()
    deadline = probe_deadline()
    budget = BUDGET_S if deadline is None else max(0.0, min(BUDGET_S, deadline - began))
    why = (f"the stacks probe's {BUDGET_S:g} s were spent" if budget == BUDGET_S
           else "the end probes' budget was spent")
    chosen, skipped = targets[:MAX_PROCESSES], targets[MAX_PROCESSES:]
    pool = ThreadPoolExecutor(max_workers=_workers(len(chosen)))
    pending = {pool.submit(take_stacks, p, exe, _TIMEOUT_S if k < must
                           else max(0.1, min(_TIMEOUT_S, budget)), native): p
               for k, p in enumerate(chosen)}
    first = set(list(pending)[:must])
    try:
        while pending:
            now_m = time.monotonic()
            left = began + budget - now_m
            if left <= 0:             # the deciding ones: never the part a budget drops
                left = began + budget + _TIMEOUT_S - now_m if first & set(pending) else 0
            if left <= 0 or cancel.stopping():
                why = f"{cancel.stopping()} ended the recording" if cancel.stopping() else why
                break
            done, _ = wait(pending, timeout=min(left, cancel.SLICE_S),
                           return_when=FIRST_COMPLETED)
            for f in done:
                del pending[f]
                yield from f.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    for pid in pending.values():
        yield ev.PyStack(ts=now, pid=pid, tid=0, error=f"not taken: {why}")
    for p in skipped:
        yield ev.PyStack(ts=now, pid=p, tid=0, error=f"not taken: more than {MAX_PROCESSES} "
                         "Python processes (the first ones were)")


def native_stacks_probe(pids: List[int], analyzer: object = None) -> Iterator[ev.Event]:
    """``py_stacks_probe`` with native frames (attach --native)."""
    return py_stacks_probe(pids, analyzer, native=True)


py_stacks_probe.__name__ = "python stacks"
native_stacks_probe.__name__ = "python and native stacks"
