"""Harness that builds, starts and reliably kills the scenario programs.

The scenarios in ``fixtures/scenarios/`` are real programs that drive a
process tree into a real kernel state (spinning, deadlocked, idle, ...) and
then print one line ``READY <pid> [extra...]``.  This module:

* ``build_scenarios()`` compiles the C scenarios once (cached by mtime);
* ``start_scenario(name, *args)`` starts one in its own session / process
  group, waits for its READY line and returns a :class:`Scenario` (usable as
  a context manager) whose ``stop()`` SIGKILLs the whole group, reaps it and
  checks that nothing of it is left running;
* ``leftover_processes()`` lists live processes of every scenario started
  by this Python process that should be gone (used by ``conftest.py``).

Only the standard library is used, so analyzer tests and benchmarks can
import it too.
"""
from __future__ import annotations

import atexit
import collections
import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
SCENARIO_DIR = REPO / "fixtures" / "scenarios"
BIN_DIR = SCENARIO_DIR / "bin"
READY_RE = re.compile(r"^READY (\d+)(?: (.*))?$")

_build_lock = threading.Lock()
# pgid -> Scenario, for every scenario started by this process (never pruned,
# so the end-of-session check can look at all of them).
_started: dict[int, "Scenario"] = {}


class ScenarioError(RuntimeError):
    """A scenario failed to start, or could not be cleaned up."""


# --------------------------------------------------------------------------
# building and locating

def build_scenarios(force: bool = False) -> dict[str, Path]:
    """Compile every C scenario into ``fixtures/scenarios/bin`` (only when the
    source is newer than the binary) and return ``{name: binary}``."""
    with _build_lock:
        # load fixtures/scenarios/build.py by path (a "build" package may exist)
        spec = importlib.util.spec_from_file_location("_scenario_build", SCENARIO_DIR / "build.py")
        assert spec is not None and spec.loader is not None
        builder = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(builder)
        try:
            paths = builder.build(force=force)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise ScenarioError(f"building C scenarios failed: {exc}") from exc
        return {p.name: p for p in paths}


def available_scenarios() -> list[str]:
    """Names of all scenarios (C and Python)."""
    names = {p.stem for p in SCENARIO_DIR.glob("*.c")}
    names |= {p.stem for p in SCENARIO_DIR.glob("*.py")
              if p.stem != "build" and not p.stem.startswith("_")}
    return sorted(names)


def scenario_command(name: str, *args: str, python: str = sys.executable) -> list[str]:
    """The argv that runs scenario *name* (building C scenarios if needed)."""
    py = SCENARIO_DIR / f"{name}.py"
    if py.exists() and name != "build":
        return [python, str(py), *args]
    if (SCENARIO_DIR / f"{name}.c").exists():
        exe = build_scenarios()[name]
        return [str(exe), *args]
    raise ScenarioError(f"no scenario named {name!r}; have {available_scenarios()}")


# --------------------------------------------------------------------------
# /proc helpers

def read_stat(pid: int, tid: int | None = None) -> list[str] | None:
    """Fields of /proc/PID[/task/TID]/stat, numbered like proc(5) minus one
    (``fields[2]`` is the state, ``fields[3]`` the ppid, ``fields[51]`` the
    exit code); the comm is ``fields[1]`` without parentheses.  None if gone."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path) as f:
            data = f.read()
    except OSError:
        return None
    lpar, rpar = data.index("("), data.rindex(")")
    return [data[:lpar].strip(), data[lpar + 1:rpar], *data[rpar + 2:].split()]


def thread_ids(pid: int) -> list[int]:
    """Thread ids of *pid*, main thread first; [] if it is gone."""
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []


def _all_stats() -> Iterator[list[str]]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = read_stat(int(entry))
            if st is not None:
                yield st


def process_tree(root: int) -> list[int]:
    """*root* and all its live descendants (from /proc ppid links), root first."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    present = set()
    for st in _all_stats():
        pid = int(st[0])
        present.add(pid)
        children[int(st[3])].append(pid)
    if root not in present:
        return []
    out, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(sorted(children.get(pid, ())))
    return out


def group_members(pgid: int, include_zombies: bool = True,
                  started_before: int | None = None) -> list[int]:
    """Pids whose process group is *pgid* (optionally only those whose start
    time, in clock ticks since boot, is <= *started_before*)."""
    return sorted(int(st[0]) for st in _all_stats()
                  if int(st[4]) == pgid and (include_zombies or st[2] != "Z")
                  and (started_before is None or int(st[21]) <= started_before))


def _proc_field(path: str, name: str) -> str:
    try:
        with open(path) as f:
            return next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith(name + ":")), "?")
    except OSError:
        return "gone"


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as exc:
        return f"({exc.strerror})"


def describe_group(pgid: int) -> str:
    """One line per thread of the process group ``pgid``: state, syscall, wchan, tracer (why
    a scenario is not READY: where each of its threads is)."""
    lines = []
    for pid in group_members(pgid):
        st = read_stat(pid)
        cmd = _read(f"/proc/{pid}/cmdline").replace("\0", " ")[:100]
        lines.append(f"pid {pid} {st[2] if st else '?'} TracerPid "
                     f"{_proc_field(f'/proc/{pid}/status', 'TracerPid')}: {cmd}")
        for tid in thread_ids(pid):
            task = f"/proc/{pid}/task/{tid}"
            tst = read_stat(pid, tid)
            lines.append(f"  tid {tid} {tst[1] if tst else '?'} {tst[2] if tst else '?'} "
                         f"syscall {_read(task + '/syscall').split(' ')[0]} "
                         f"wchan {_read(task + '/wchan')}")
    return "\n".join(lines) or "(none left)"


def boot_ticks() -> int:
    """Now, in the clock ticks since boot that /proc/PID/stat starttime uses."""
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK")) + 1


# --------------------------------------------------------------------------
# running

def ready_facts(extra: str) -> dict[str, str]:
    """The ``key=value`` fields of a READY line's extra part (``stuck=12:14 tp0=12`` ->
    ``{"stuck": "12:14", "tp0": "12"}``); plain fields are left out."""
    return dict(f.split("=", 1) for f in extra.split() if "=" in f)


def pid_tid(value: str) -> tuple[int, int]:
    """``"PID:TID"`` (a READY fact naming a thread) -> ``(pid, tid)``."""
    pid, tid = value.split(":")
    return int(pid), int(tid)


def pid_tids(value: str) -> tuple[int, list[int]]:
    """``"PID:TID,TID,..."`` (a READY fact naming several threads of one process)."""
    pid, tids = value.split(":")
    return int(pid), [int(t) for t in tids.split(",")]


class Scenario:
    """A running scenario.  Attributes:

    ``name``, ``argv``; ``pid`` (the pid in the READY line: the root);
    ``pgid`` (== the pid of the started program; the whole tree is in it);
    ``extra`` (the rest of the READY line, '' if none); ``extra_fields``
    (``extra.split()``); ``facts`` (its ``key=value`` fields, see :func:`ready_facts`);
    ``output`` (recent stdout lines after READY) and
    ``lines_after_ready`` (how many were read); ``stderr_tail``.
    """

    def __init__(self, name: str, argv: list[str], ready_timeout: float = 15.0,
                 settle: float = 0.2) -> None:
        self.name = name
        self.argv = argv
        self.pid = 0
        self.extra = ""
        self.output: collections.deque[str] = collections.deque(maxlen=2000)
        self.lines_after_ready = 0
        self._stderr: collections.deque[str] = collections.deque(maxlen=200)
        # its stdout before READY, apart: a chatty scenario must not push its stderr out
        self._early: collections.deque[str] = collections.deque(maxlen=20)
        self._ready = threading.Event()
        self._stopped = False
        self.stopped_at: int | None = None  # boot ticks, set by stop()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
            cwd=str(SCENARIO_DIR), text=True, errors="replace", bufsize=1)
        self.pgid = self.proc.pid
        _started[self.pgid] = self
        self._readers = [
            threading.Thread(target=self._drain_stdout, daemon=True,
                             name=f"scenario-{name}-stdout"),
            threading.Thread(target=self._drain_stderr, daemon=True,
                             name=f"scenario-{name}-stderr"),
        ]
        for t in self._readers:
            t.start()
        try:
            self._wait_ready(ready_timeout)
            # The process that prints READY necessarily does so just *before*
            # entering its final blocking call; give it a moment to get there.
            time.sleep(settle)
        except BaseException:
            self.stop(check=False)
            raise

    # -- output draining (never lets the scenario block on a full pipe)
    def _drain_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if not self._ready.is_set():
                m = READY_RE.match(line)
                if m:
                    self.pid = int(m.group(1))
                    self.extra = m.group(2) or ""
                    self._ready.set()
                    continue
                self._early.append(f"[stdout before READY] {line}")
                continue
            self.output.append(line)
            self.lines_after_ready += 1

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip("\n"))

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.05):
            status = self._exit_status()
            if status is not None:
                self._readers[0].join(1.0)  # READY may still be in the pipe
                if self._ready.is_set():
                    break
                raise ScenarioError(
                    f"scenario {self.name} exited with {status} before READY:\n"
                    + self.early_tail)
            if time.monotonic() > deadline:
                raise ScenarioError(
                    f"scenario {self.name} not READY after {timeout}s:\n" + self.early_tail
                    + "\nwhere its processes were:\n" + describe_group(self.pgid))

    # -- inspection
    @property
    def extra_fields(self) -> list[str]:
        return self.extra.split()

    @property
    def facts(self) -> dict[str, str]:
        return ready_facts(self.extra)

    @property
    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    @property
    def early_tail(self) -> str:
        """Its last lines of stdout before READY, then its stderr."""
        return "\n".join([*self._early, *self._stderr])

    def all_pids(self) -> list[int]:
        """The scenario's live process tree (from /proc ppid links), root first.
        Zombies are included (they are still in /proc)."""
        return process_tree(self.pid)

    def threads(self, pid: int | None = None) -> list[int]:
        """Thread ids of *pid* (default: the root), main thread first."""
        return thread_ids(self.pid if pid is None else pid)

    def alive(self) -> bool:
        return self._exit_status() is None

    def _exit_status(self) -> int | None:
        """The root's exit status (negative: the signal that killed it), None while it runs.
        Never reaps it: until stop() does, its pid, the group's id, stays ours (a reaped
        root's pid can be another test's scenario's by the time killpg runs: pid_max is 32768
        and a whole run goes round it)."""
        if self.proc.returncode is not None:
            return self.proc.returncode
        try:
            got = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.proc.poll()
        if got is None:
            return None
        return got.si_status if got.si_code == os.CLD_EXITED else -got.si_status

    # -- teardown
    def stop(self, check: bool = True, timeout: float = 10.0) -> None:
        """SIGKILL the whole process group (and any descendant that left it),
        reap the root, wait until no member of the group is left running.
        With *check*, raise ScenarioError if something survives."""
        if self._stopped:
            return
        self.stopped_at = boot_ticks()
        victims = set(group_members(self.pgid, started_before=self.stopped_at))
        if self.proc.returncode is None:  # root not reaped yet, so its pid is still ours
            victims.update(process_tree(self.proc.pid))
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + timeout
        # (started_before: never touch a later process that reused the pgid)
        left = group_members(self.pgid, False, self.stopped_at)
        while left and time.monotonic() < deadline:
            for pid in left:  # e.g. a member that was ptrace-stopped while we signalled
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)
            left = group_members(self.pgid, False, self.stopped_at)
        # Orphaned children are left as zombies until init reaps them (which
        # may take a second or so here); they are dead, so don't wait for it.
        for t in self._readers:
            t.join(1.0)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self._stopped = True
        if check and left:
            raise ScenarioError(f"scenario {self.name}: processes {left} survived SIGKILL")

    def __enter__(self) -> "Scenario":
        return self

    def __exit__(self, *exc: object) -> None:
        # Don't mask a test failure with a cleanup failure.
        self.stop(check=exc[0] is None)

    def __repr__(self) -> str:
        return f"<Scenario {self.name} pid={self.pid} extra={self.extra!r}>"


def start_scenario(name: str, *args: str, ready_timeout: float = 15.0,
                   settle: float = 0.2, python: str = sys.executable) -> Scenario:
    """Start scenario *name* with *args*; return once it printed READY.

    Use as a context manager (``with start_scenario("spin") as sc: ...``) or
    call ``sc.stop()``; the pytest fixture ``scenario`` does that for you.
    *settle*: seconds to sleep after READY (the printer is about to enter
    its final blocking call when it prints)."""
    return Scenario(name, scenario_command(name, *map(str, args), python=python),
                    ready_timeout=ready_timeout, settle=settle)


def leftover_processes() -> dict[str, list[int]]:
    """``{scenario name: [pids]}`` of live (non-zombie) processes belonging
    to scenarios started by this process; empty when everything is clean."""
    out: dict[str, list[int]] = {}
    for pgid, sc in _started.items():
        # a stopped scenario's pgid may have been reused since: only count
        # processes that already existed when it was stopped
        left = group_members(pgid, include_zombies=False, started_before=sc.stopped_at)
        if left:
            out.setdefault(sc.name, []).extend(left)
    return out


def kill_leftovers() -> None:
    """Stop every scenario started by this process (best effort)."""
    for sc in list(_started.values()):
        if sc._stopped and not group_members(sc.pgid, False, sc.stopped_at):
            continue
        sc._stopped = False
        sc.stop(check=False, timeout=5.0)


# Last line of defence (e.g. pytest interrupted before fixture teardown).
atexit.register(kill_leftovers)
