"""How the suite runs on several workers, and which tests must not run beside which.

``-n auto --dist loadscope`` (pytest-xdist, the ``test`` extra; the README's test command, and
CI's) runs every tier on several worker processes at once, and ``scope_of`` below defines the
scopes (tests/conftest.py hands xdist ``make_scheduler``'s scheduler). No ``-n`` (pyproject.toml's
addopts give none: a targeted run of one file), or ``-n 0``, runs in one process.

Tests are independent unless this module says otherwise: each starts its own scenario processes,
attaches only to their pids and writes under its own ``tmp_path``; the live checks of what a run
left behind (strace processes, BPF programs, traced or stopped threads) look at that run's own
processes only, since the machine is shared. What this module adds:

* ``scope_of(nodeid)``: the unit of work a test belongs to; the tests of one unit run on one
  worker, one after another, in collection order. A live module in ``SERIAL`` shares something
  of the machine with the other modules of its group (``SERIAL`` says what); a unit or replay
  module is one unit (its module-scoped fixtures built once), as is a live module in
  ``SHARED_FIXTURES``; any other live test is a unit of its own (they mostly wait on a scenario
  or a recording window, so they are what runs side by side). ``make_scheduler`` hands the
  serial groups out first, then the live modules and tests, the long unit modules and the
  other unit and replay modules (the short ones fill the end): ``_rank``.
* ``EXCLUSIVE``: modules and tests that run alone: while one runs, no other test of the run
  does (``RunLock``: every other test holds the run's lock shared, these hold it exclusively),
  but the ``LONG_MODULES``' and the ``BUILDS``' (CPU, minutes long: ``takes_run_lock``).
* ``auto_workers(cpus)``: what ``-n auto`` means here: two workers a CPU and one more (the
  live tests mostly wait: with two a CPU, 20-50% of the CPUs idled through their minutes), at
  most 8; ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still overrides it.

(Not xdist's ``loadgroup`` and ``xdist_group`` marks: with pytest 9.2 its worker-side renaming of
node ids no longer takes, and the groups are silently ignored: pytest-xdist issue 1386.)
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO, Iterator

import pytest

# module name -> (group, what its tests share with the group's other modules)
SERIAL: dict[str, tuple[str, str]] = {
    "test_launchers": ("launchers", "Slurm's, munge's and OpenSSH's daemons, started as root"),
    "test_multinode": ("netns", "network namespaces and veth pairs with 192.0.2.x addresses"),
    "test_netns": ("netns", "the machine's network namespaces, listed and entered"),
    "test_safety": ("safety", "hangtrace killed mid-recording, every process scanned for what "
                              "it left, a 1,000-thread target"),
    "test_storms": ("storms", "a fork storm and thread churn (EXCLUSIVE too)"),
    "test_report_screen_live": ("heavy", "tp8_server's 802 threads (EXCLUSIVE too)"),
    "test_deciding_stacks": ("heavy", "tp8_server beside load 4 it makes (EXCLUSIVE too)"),
}
# module name, or module::test, -> why nothing else of the run may run meanwhile
EXCLUSIVE: dict[str, str] = {
    "test_storms": "a fork storm floods the pid space and both CPUs: the other tests' targets "
                   "would be starved, and the storm is what is measured",
    "test_cli_attach::test_name_picks_every_scheduler_by_title":
        "attach --name sglang::scheduler takes every process so titled: another test's "
        "sglang_like would join its tree (seen: its verdict became 'progressing')",
    "test_report_screen_live": "tp8_server: 802 threads whose recording takes both CPUs for "
                               "seconds; beside the run's other tests its 2 s window grew past "
                               "2.3 s, one 1 Hz watchdog thread of four woke 3 times and got a "
                               "verdict (and report lines) of its own: 61 lines",
    "test_deciding_stacks": "it makes load 4 (two spinners a CPU) to check what survives it: "
                            "every other test beside it would be starved, and its load would "
                            "not be the one it means",
    "test_ebpf_backend::test_counts_of_a_flood_match_the_truth_when_the_target_exits_first":
        "a 3 M-call loop on one CPU, every call counted in the kernel",
    "test_ebpf_backend::test_counts_match_the_kernel_io_accounting_of_a_target_still_running":
        "a loop of cheap calls on one CPU for 5 s, every call counted in the kernel",
}
# live modules with a module- or class-scoped fixture (tests/unit/test_parallel_runs.py finds them)
SHARED_FIXTURES = {"test_evidence_gathered"}
# unit and replay modules that take minutes on one worker (the 1 M-event export alone 403 s in
# a whole run at load 19): the first modules handed out after the live tests, never last and
# alone. Their tests do not take the run's lock (pure CPU, nothing shared): held for minutes,
# it kept every EXCLUSIVE test, and with it the whole run, waiting.
LONG_MODULES = {"test_export", "test_fuzz", "test_feed_calls_twin", "test_export_bounds"}
# live modules that build and install the package (the compiler and pip for minutes, in their
# own temporary folders; check_dist's attach has a target of its own): handed out right after
# the serial groups, and they do not take the run's lock either. Holding it shared for minutes
# (check_dist: 150-250 s) kept the waiting EXCLUSIVE eBPF floods, and through the turnstile
# every other worker, idle behind it: a whole run stalled 250 s on one worker's build.
BUILDS = {"test_dist", "test_containerfile"}


def scope_of(nodeid: str) -> str:
    """The unit of work of the test ``nodeid`` (module doc)."""
    path = nodeid.split("::", 1)[0]
    stem = Path(path).stem
    if stem in SERIAL:
        return f"serial:{SERIAL[stem][0]}"
    if "/live/" in f"/{path}" and stem not in SHARED_FIXTURES:
        return nodeid
    return path


def _rank(scope: str) -> int:
    """Serial groups first, then the builds (``BUILDS``: minutes long, never at the end), a
    live module with shared fixtures (its tests one after another), the live tests, the long
    unit and replay modules (``LONG_MODULES``: after the live tests, whose load they would add
    to) and the other unit and replay modules (short ones fill the end)."""
    if scope.startswith("serial:"):
        return 0
    stem = Path(scope.split("::", 1)[0]).stem
    if stem in BUILDS:
        return 1
    if "::" in scope:
        return 3
    if "/live/" in f"/{scope}":
        return 2
    return 4 if stem in LONG_MODULES else 5


def takes_run_lock(nodeid: str) -> bool:
    """Whether the test ``nodeid`` holds the run's lock (``RunLock``): all but ``LONG_MODULES``
    and ``BUILDS``."""
    stem = Path(nodeid.split("::", 1)[0]).stem
    return stem not in LONG_MODULES and stem not in BUILDS


def is_exclusive(nodeid: str) -> bool:
    """Whether the test ``nodeid`` runs alone (``EXCLUSIVE``: its module, or it by name)."""
    path, _, name = nodeid.partition("::")
    stem = Path(path).stem
    return stem in EXCLUSIVE or f"{stem}::{name.split('[', 1)[0]}" in EXCLUSIVE


def make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scheduler of scopes, with ``scope_of``'s scopes handed out in ``_rank`` order."""
    from xdist.scheduler.loadscope import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def _assign_work_unit(self, node) -> None:  # type: ignore[no-untyped-def]
            if not self._ordered:       # the first call: the queue is whole
                units = sorted(self.workqueue.items(), key=lambda unit: _rank(unit[0]))
                self.workqueue.clear()
                self.workqueue.update(units)
                self._ordered = True
            super()._assign_work_unit(node)

    return Scheduling(config, log)


def auto_workers(cpus: int) -> int:
    """``-n auto``'s number of workers for ``cpus`` usable CPUs (module doc)."""
    return max(2, min(8, 2 * cpus + 1))


class RunLock:
    """A readers-writer lock shared by the workers of one run (flock on two files in the run's
    base temporary folder). A turnstile keeps a waiting writer from being starved: a reader
    passes it before taking the lock shared; a writer holds it while it waits and runs."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._turnstile: IO[str] = open(folder / "run.turnstile", "a")
        self._lock: IO[str] = open(folder / "run.lock", "a")

    @contextlib.contextmanager
    def hold(self, exclusive: bool) -> Iterator[None]:
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except BaseException:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
            raise
        if not exclusive:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            if exclusive:
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def close(self) -> None:
        self._turnstile.close()
        self._lock.close()


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
