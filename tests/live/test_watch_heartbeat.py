"""hangtrace watch on the stats-line shapes of serving_tree.py: a tree whose only output is a
stats line that repeats with the same numbers (a heartbeat) while its runner spins is captured
after the silence; its slow twin, whose stats line counts tokens that advance, is never
captured in a bounded run (issue 30: watch reads the analyzer's answer)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.live, pytest.mark.slow]

HANGTRACE = [sys.executable, "-m", "tracer"]


def test_a_stats_line_that_says_nothing_new_is_silence(scenario, tmp_path):
    sc = scenario("serving_tree", "--shape", "stats-hang", ready_timeout=40)
    p = subprocess.run(HANGTRACE + ["watch", str(sc.pid), "--silent-for", "2.5", "--once",
                                    "--duration", "1.5", "--backend", "proc", "--interval",
                                    "0.5", "--output-dir", str(tmp_path), "--json"],
                       capture_output=True, text=True, timeout=120)
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "busy-waiting" and p.returncode == 3, p.stderr
    assert doc["watch"]["recorded_from"] - doc["watch"]["silent_since"] >= 2.5


def test_the_slow_twin_whose_stats_advance_is_never_captured(scenario, tmp_path):
    sc = scenario("serving_tree", "--shape", "stats-slow", ready_timeout=40)
    w = subprocess.Popen(HANGTRACE + ["watch", str(sc.pid), "--silent-for", "2.5",
                                      "--duration", "1", "--backend", "proc", "--interval",
                                      "0.5", "--output-dir", str(tmp_path), "-v"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(8.0)         # start-up, then three times --silent-for
        w.send_signal(signal.SIGTERM)
        out, err = w.communicate(timeout=30)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    assert w.returncode == 0 and "watch stopped" in err, err
    assert "no progress since" not in err and list(tmp_path.iterdir()) == [], err
