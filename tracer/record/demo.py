"""``hangtrace demo``: start a bundled hanging scenario, attach to it, print the verdict.

Contract: finds the scenario programs through tracer/resources.py (fixtures/scenarios/ in a
checkout, the package's ``tracer/scenarios`` in an installed copy), starts one in its own
process group, waits for its ``READY <pid>`` line, records it with the chosen backend like
``attach`` does, and always kills the whole scenario group after, whatever happens (Ctrl-C
included). Python scenarios run with this interpreter as they are. C scenarios are compiled
with gcc on first use (their build.py, by mtime): into ``bin/`` beside the sources in a
checkout, into ``$XDG_CACHE_HOME/hangtrace/scenarios`` (default ``~/.cache``) for an installed
copy, whose package folder is not a place to write; without gcc a C scenario is refused with
one line saying so. ``scenario_summaries()``: what each shows and the verdict to expect, from
the scenarios' README table (shipped with them; else the docstring's head), for ``demo --list``.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

from ..errors import HangtraceError, ToolMissing, shown
from ..resources import is_checkout, scenario_dir

__all__ = ["DemoError", "RunningScenario", "scenario_argv", "scenario_names", "SCENARIO_DIR",
           "ScenarioSummary", "scenario_summaries"]

SCENARIO_DIR = scenario_dir()
_NOT_SCENARIOS = {"build", "__init__"}


class DemoError(HangtraceError):
    pass


def scenario_names() -> List[str]:
    """Every bundled scenario (Python and C), by name."""
    names = {p.stem for p in SCENARIO_DIR.glob("*.c")}
    names |= {p.stem for p in SCENARIO_DIR.glob("*.py")
              if not p.stem.startswith("_") and p.stem not in _NOT_SCENARIOS}
    return sorted(names)


class ScenarioSummary(NamedTuple):
    """What ``demo --list`` says of one scenario."""
    name: str
    language: str           # "C" or "Python"
    shows: str              # what it mimics
    expected: str           # the verdict to expect ("" when its truth says none)


_ROW = re.compile(r"^\| `(\w+)`(?: \(C\))? \|")
_DOC_HEAD = re.compile(r'(?:"""|/\*)\s*\*?\s*[\w.]+ - (.+?)(?:\n\s*\n|\n \*\n|\n[A-Z][a-z]+:)', re.S)


def _truth_rows() -> Dict[str, List[str]]:
    """name -> the cells of its row in the scenarios' README table (mimics ... correct diagnosis)."""
    try:
        text = (SCENARIO_DIR / "README.md").read_text()
    except OSError:
        return {}
    rows = {}
    for line in text.splitlines():
        m = _ROW.match(line)
        if m:
            rows[m.group(1)] = [c.strip().replace("`", "") for c in line.strip().strip("|").split("|")]
    return rows


def _doc_head(path: Path) -> str:
    """The first sentence-block of a scenario's docstring (after "spin.c - "), on one line."""
    try:
        m = _DOC_HEAD.search(path.read_text()[:4000])
    except OSError:
        return ""
    return " ".join(m.group(1).replace(" * ", " ").split()) if m else ""


def scenario_summaries() -> List[ScenarioSummary]:
    """Every scenario with what it shows and the verdict to expect (module doc)."""
    rows, out = _truth_rows(), []
    for name in scenario_names():
        c = (SCENARIO_DIR / f"{name}.c").exists()
        row = rows.get(name)
        if row and len(row) >= 3:
            shows, expected = row[1], row[-1]
        else:
            shows = _doc_head(SCENARIO_DIR / f"{name}.{'c' if c else 'py'}")
            expected = "not in the scenarios' table: its docstring says what each mode shows"
        out.append(ScenarioSummary(name, "C" if c else "Python", shows, expected))
    return out


def c_binary_dir() -> Path:
    """Where compiled C scenarios go (module doc)."""
    if is_checkout(SCENARIO_DIR):
        return SCENARIO_DIR / "bin"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "hangtrace" / "scenarios"


def _build_c(name: str) -> Path:
    if shutil.which("gcc") is None:
        raise ToolMissing(f"scenario {name!r} is a C program and gcc is not installed "
                          "(apt-get install gcc); the Python scenarios need nothing: "
                          "hangtrace demo --list")
    spec = importlib.util.spec_from_file_location("_hangtrace_scenario_build",
                                                  SCENARIO_DIR / "build.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = c_binary_dir()
    try:
        mod.build(out_dir=out)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise DemoError(f"building the C scenarios into {out} failed: {exc}") from None
    return out / name


def scenario_argv(name: str) -> List[str]:
    py = SCENARIO_DIR / f"{name}.py"
    if py.exists() and name in scenario_names():
        return [sys.executable, str(py)]
    if (SCENARIO_DIR / f"{name}.c").exists():
        return [str(_build_c(name))]
    raise DemoError(f"no scenario {shown(name)} (bundled: {', '.join(scenario_names())})")


class RunningScenario:
    def __init__(self, name: str, timeout: float = 20.0) -> None:
        self.proc = subprocess.Popen(scenario_argv(name), stdout=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     text=True, cwd=str(SCENARIO_DIR))
        self.pid: Optional[int] = None
        ready = threading.Event()

        def drain() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:   # keep draining so the scenario never blocks
                if self.pid is None and line.startswith("READY "):
                    self.pid = int(line.split()[1])
                    ready.set()
            ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(timeout) or self.pid is None:
            self.kill()
            raise DemoError(f"scenario {name} did not become ready (some need arguments: "
                            "see their source)")

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
