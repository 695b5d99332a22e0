"""``hangtrace demo``: start a bundled hanging scenario, attach to it, print the verdict.

Contract: finds the scenario programs in the source checkout (fixtures/scenarios beside the
package), starts one in its own process group, waits for its ``READY <pid>`` line, records it
with the chosen backend like ``attach`` does, and always kills the whole scenario group after,
whatever happens (Ctrl-C included).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import List, Optional

from ..errors import HangtraceError, shown

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"


class DemoError(HangtraceError):
    pass


def scenario_argv(name: str) -> List[str]:
    py = SCENARIO_DIR / f"{name}.py"
    if py.exists():
        return [sys.executable, str(py)]
    src = SCENARIO_DIR / f"{name}.c"
    if src.exists():
        subprocess.run([sys.executable, str(SCENARIO_DIR / "build.py")], check=True,
                       stdout=subprocess.DEVNULL)
        return [str(SCENARIO_DIR / "bin" / name)]
    raise DemoError(f"no scenario {shown(name)} in {SCENARIO_DIR} (the demo needs a source "
                    "checkout)")


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
            raise DemoError(f"scenario {name} did not become ready")

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
