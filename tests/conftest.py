"""Pytest fixtures for running the real scenario programs, and the tiers.

Tests live in three folders: ``unit/`` (pure functions, tables of real inputs), ``replay/``
(recorded traces and logs against expected reports) and ``live/`` (attach to real scenario
processes; marked ``live`` by their folder). Helpers shared by the tiers sit in tests/ itself.

``scenario("name", *args, ready_timeout=15, settle=0.2)`` starts a scenario (see
``tests/scenarios.py``) and returns a READY :class:`Scenario`; every
scenario started through it is killed (whole process group) at teardown. ``sleeper`` is the
pid of a plain ``sleep 3600`` this test started, killed at teardown (no ancestor of the test: a
pid a user would give; it outlives however long a busy machine makes an attach).
A session-wide autouse check fails the run if any scenario process started
in this session is still alive at the end (and kills it). ``compiled_helpers``: the module of
the compiled helpers (tracer/strace/fastpath.py), built into a temporary directory where the
checkout has none; the tests that need it skip where it cannot be built.

The suite runs on several workers (pytest-xdist): ``tests/parallel.py`` says how, and which
tests run one after another (its scopes, through ``pytest_xdist_make_scheduler``) or alone (the
run's lock, held by ``_alone_when_asked`` around every test).
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import parallel  # noqa: E402  (tests/parallel.py)
import scenarios  # noqa: E402  (tests/scenarios.py)
from scenarios import Scenario  # noqa: E402

StartScenario = Callable[..., Scenario]

# An xdist worker starts with COLUMNS=80 and LINES=24 in its environment (the one-process run has
# neither): the programs the tests start would take them over a pseudo-terminal's own size (a
# progress bar's frames wrapped at 80 columns on a 120-column pty). Same environment in both runs.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)


@pytest.fixture
def sleeper() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "3600"])     # killed at teardown; outlives a slow attach
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture(scope="session")
def scenario_bins() -> dict[str, Path]:
    """Compiled C scenarios, ``{name: path}`` (built once per session)."""
    return scenarios.build_scenarios()


@pytest.fixture
def scenario(scenario_bins: dict[str, Path]) -> Iterator[StartScenario]:
    """Factory: ``sc = scenario("spin")`` -> a started, READY Scenario."""
    running: list[Scenario] = []

    def start(name: str, *args: object, ready_timeout: float = 15.0,
              settle: float = 0.2) -> Scenario:
        sc = scenarios.start_scenario(name, *map(str, args), ready_timeout=ready_timeout,
                                      settle=settle)
        running.append(sc)
        return sc

    yield start
    errors = []
    for sc in reversed(running):
        try:
            sc.stop()
        except scenarios.ScenarioError as exc:
            errors.append(str(exc))
    assert not errors, errors


@pytest.fixture(scope="session")
def compiled_helpers(tmp_path_factory) -> ModuleType:
    """The compiled helpers' module (module doc)."""
    from tracer.strace import fastpath
    mod = fastpath.compiled()
    if mod is not None:
        return mod
    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("build_fast", root / "scripts" / "build_fast.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)  # type: ignore[union-attr]
    try:
        path = build.build(str(tmp_path_factory.mktemp("fast")), quiet=True)
    except RuntimeError as e:
        pytest.skip(f"compiled helpers cannot be built here: {e}")
    spec = importlib.util.spec_from_file_location("tracer.strace._fast", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="session", autouse=True)
def _no_scenario_survivors() -> Iterator[None]:
    yield
    left = scenarios.leftover_processes()
    if left:
        scenarios.kill_leftovers()
        pytest.fail(f"scenario processes survived the test session: {left}")


def pytest_collection_modifyitems(config, items) -> None:
    """The tiers are folders: every test under tests/live/ attaches to or starts real processes
    and is marked ``live`` (``-m "not live"`` runs unit and replay alone)."""
    live = Path(__file__).resolve().parent / "live"
    for item in items:
        if live in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.live)


@pytest.hookimpl(optionalhook=True, tryfirst=True)      # before xdist's own
def pytest_xdist_make_scheduler(config, log):  # type: ignore[no-untyped-def]
    """``--dist loadscope`` (the README's test command) with tests/parallel.py's scopes."""
    if config.getvalue("dist") != "loadscope":
        return None
    return parallel.make_scheduler(config, log)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config) -> int | None:
    """``-n auto`` (the README's test command): tests/parallel.py's count, unless
    PYTEST_XDIST_AUTO_NUM_WORKERS says."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return parallel.auto_workers(parallel.usable_cpus())


@pytest.fixture(scope="session")
def _run_lock(request, tmp_path_factory) -> Iterator[parallel.RunLock | None]:
    """The lock of this run's workers (in the run's base temporary folder, which every worker's
    own folder is in); None outside xdist, where tests run one at a time anyway."""
    if not hasattr(request.config, "workerinput"):
        yield None
        return
    lock = parallel.RunLock(tmp_path_factory.getbasetemp().parent)
    yield lock
    lock.close()


@pytest.fixture(autouse=True)
def _alone_when_asked(request, _run_lock: parallel.RunLock | None) -> Iterator[None]:
    """Every test holds the run's lock (but tests/parallel.py's LONG_MODULES): shared, or alone
    for its EXCLUSIVE."""
    if _run_lock is None or not parallel.takes_run_lock(request.node.nodeid):
        yield
        return
    with _run_lock.hold(parallel.is_exclusive(request.node.nodeid)):
        yield
