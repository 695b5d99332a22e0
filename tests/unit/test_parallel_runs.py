"""The suite's parallel run (tests/parallel.py): the README's command runs on several workers,
the tests that share something of the machine stay on one worker, the exclusive ones run alone
(the run's readers-writer lock, across processes), and a module's shared fixture is built once."""
from __future__ import annotations

import multiprocessing
import re
import sys
import time
import tomllib
from pathlib import Path

import pytest

import parallel

ROOT = Path(__file__).resolve().parents[2]


def test_the_parallel_run_is_documented_and_installed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # The README's test command (CI's, word for word) is the parallel run, with
    # tests/parallel.py's scheduler (loadscope) and its number of workers (auto)
    assert _readme_commands()[1].endswith(" -m pytest -q -n auto --dist loadscope")
    assert any(r.startswith("pytest-xdist") for r in project["project"]
               ["optional-dependencies"]["test"]), "setup.sh installs the test extra"


def _readme_commands() -> list[str]:
    """The README's two commands at its top: the demo's and the tests'."""
    blocks = re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)[:2]
    assert all(len(b.splitlines()) == 1 for b in blocks), blocks
    return blocks


def test_ci_runs_the_readme_test_command_word_for_word() -> None:
    demo, tests = _readme_commands()
    assert demo.startswith("bash scripts/setup.sh && ") and "hangtrace demo" in demo
    assert tests.startswith("bash scripts/setup.sh && ") and "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == tests, (ci[-1], tests)


@pytest.mark.parametrize("cpus,workers", [(1, 3), (2, 5), (3, 7), (4, 8), (64, 8)])
def test_auto_is_two_workers_a_cpu_and_one_more_within_bounds(cpus: int, workers: int) -> None:
    assert parallel.auto_workers(cpus) == workers


def test_every_serial_and_exclusive_module_exists() -> None:
    live = {p.stem for p in (ROOT / "tests" / "live").glob("test_*.py")}
    modules = {key.split("::")[0] for key in parallel.EXCLUSIVE}
    assert set(parallel.SERIAL) <= live and modules <= live
    tests = [key.split("::") for key in parallel.EXCLUSIVE if "::" in key]
    assert all(f"def {name}(" in (ROOT / "tests" / "live" / f"{m}.py").read_text()
               for m, name in tests)
    assert {m for m in parallel.EXCLUSIVE if "::" not in m} <= set(parallel.SERIAL), \
        "an exclusive module stays in order"


def test_shared_fixtures_are_the_live_modules_with_wider_fixtures() -> None:
    """A live module whose fixture outlives a test runs on one worker (built once there)."""
    wide = re.compile(r"scope=[\"'](module|class|package)[\"']")
    found = {p.stem for p in (ROOT / "tests" / "live").glob("test_*.py")
             if wide.search(p.read_text())}
    assert found == parallel.SHARED_FIXTURES


@pytest.mark.parametrize("nodeid,scope", [
    ("tests/live/test_truth_live.py::test_x[a-proc]", "tests/live/test_truth_live.py::test_x[a-proc]"),
    ("tests/live/test_storms.py::test_x[strace]", "serial:storms"),
    ("tests/live/test_multinode.py::test_x", "serial:netns"),
    ("tests/live/test_netns.py::test_y[1]", "serial:netns"),
    ("tests/live/test_evidence_gathered.py::test_x", "tests/live/test_evidence_gathered.py"),
    ("tests/unit/test_export.py::test_x[a::b]", "tests/unit/test_export.py"),
    ("tests/replay/test_truth_verdicts.py::test_x", "tests/replay/test_truth_verdicts.py"),
])
def test_scopes(nodeid: str, scope: str) -> None:
    assert parallel.scope_of(nodeid) == scope


def test_units_are_handed_out_serial_groups_then_live_then_modules() -> None:
    """A live module with shared fixtures is long (its tests one after another): it starts
    before the single live tests, never at the end among the short unit modules; the long
    unit modules come right after the live tests (never beside them from the start: they
    would add to the live tests' load), before the short ones."""
    scopes = ["tests/unit/test_a.py", "tests/live/test_x.py::test_y", "serial:netns",
              "tests/live/test_evidence_gathered.py", "tests/replay/test_b.py",
              "tests/unit/test_export.py",
              "tests/live/test_dist.py::test_the_wheel_and_the_sdist_work_installed"]
    assert sorted(scopes, key=parallel._rank) == [
        "serial:netns", "tests/live/test_dist.py::test_the_wheel_and_the_sdist_work_installed",
        "tests/live/test_evidence_gathered.py", "tests/live/test_x.py::test_y",
        "tests/unit/test_export.py", "tests/unit/test_a.py", "tests/replay/test_b.py"]
    on_disk = {p.stem for p in (ROOT / "tests").glob("*/test_*.py")}
    assert parallel.LONG_MODULES <= on_disk
    assert parallel.BUILDS <= {p.stem for p in (ROOT / "tests" / "live").glob("test_*.py")}
    # minutes of compiler and pip: an EXCLUSIVE test never waits for a build to end
    assert not parallel.takes_run_lock("tests/live/test_dist.py::test_the_wheel_and_the_sdist_"
                                       "work_installed")
    # minutes of CPU, nothing shared: they never hold an exclusive test (and the run) back
    assert not parallel.takes_run_lock("tests/unit/test_export.py::test_large_trace_exports_in_"
                                       "bounded_memory")
    assert parallel.takes_run_lock("tests/unit/test_cli.py::test_x")
    assert parallel.takes_run_lock("tests/live/test_truth_live.py::test_x[a-proc]")


def test_the_heavy_live_tests_run_alone() -> None:
    for nodeid in ("tests/live/test_report_screen_live.py::test_the_tree_s_report_fits_one_80"
                   "_column_screen[proc]",
                   "tests/live/test_deciding_stacks.py::test_x[ebpf]",
                   "tests/live/test_ebpf_backend.py::test_counts_of_a_flood_match_the_truth_"
                   "when_the_target_exits_first[bcc]"):
        assert parallel.is_exclusive(nodeid), nodeid
    assert not parallel.is_exclusive("tests/live/test_ebpf_backend.py::test_ebpf_gives_the_"
                                     "right_verdict[bcc-spin]")


def test_exclusive() -> None:
    assert parallel.is_exclusive("tests/live/test_storms.py::test_x[fork-storm-ebpf]")
    assert not parallel.is_exclusive("tests/live/test_safety.py::test_x")
    assert parallel.is_exclusive(
        "tests/live/test_cli_attach.py::test_name_picks_every_scheduler_by_title")
    assert not parallel.is_exclusive("tests/live/test_cli_attach.py::test_other")


def _hold(folder: str, tag: str, exclusive: bool, seconds: float,
          log: "multiprocessing.Queue") -> None:
    lock = parallel.RunLock(Path(folder))
    with lock.hold(exclusive):
        log.put((tag, "in", time.monotonic()))
        time.sleep(seconds)
        log.put((tag, "out", time.monotonic()))
    lock.close()


def _holds_flock(pid: int, path: Path) -> bool:
    """/proc/locks has an flock of ``pid`` on ``path``'s inode."""
    inode = path.stat().st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if f[1] == "FLOCK" and f[4] == str(pid) and int(f[5].rsplit(":", 1)[1]) == inode:
            return True
    return False


@pytest.mark.skipif(sys.platform != "linux", reason="flock, /proc/locks")
def test_an_exclusive_holder_runs_alone_and_is_not_starved(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    log = ctx.Queue()

    def start(tag: str, exclusive: bool, seconds: float):  # type: ignore[no-untyped-def]
        p = ctx.Process(target=_hold, args=(str(tmp_path), tag, exclusive, seconds, log))
        p.start()
        return p

    procs = [start("r1", False, 1.0), start("r2", False, 1.0)]
    got = [log.get(timeout=60) for _ in range(2)]             # both readers hold it shared
    procs.append(start("w", True, 0.3))
    deadline = time.monotonic() + 60
    while not _holds_flock(procs[-1].pid, tmp_path / "run.turnstile"):   # the writer waits
        assert time.monotonic() < deadline
        time.sleep(0.01)
    procs.append(start("late", False, 0.1))                   # a reader after the writer
    got += [log.get(timeout=60) for _ in range(6)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    when = {(tag, what): t for tag, what, t in got}
    w_in, w_out = when[("w", "in")], when[("w", "out")]
    for reader in ("r1", "r2", "late"):           # no reader inside while the writer is
        assert when[(reader, "out")] <= w_in or when[(reader, "in")] >= w_out, (reader, when)
    assert when[("late", "in")] >= w_out, "the late reader waited for the waiting writer"
    assert when[("r1", "in")] < when[("r2", "out")] and when[("r2", "in")] < when[("r1", "out")]
