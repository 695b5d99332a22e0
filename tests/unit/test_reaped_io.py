"""ReapedIO (linux/reaped_io.py) against real /proc samples: tests/data/reaped_io/chain.json,
captured by capture.py there (Linux 6.18). A subreaper R wrote 5 bytes itself (b"gg", then
b"g" three times to a pipe) while it reaped a chain L -> H (H wrote 10,000 B, L reaped it, R
reaped L) and an orphan H2 (its parent L2 exited, H2 became R's, wrote 5,000 B, R reaped it):
R's /proc/PID/io wchar grew by 15,019 bytes, its own output is 5."""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Tuple

from tracer.events import ProcessIO
from tracer.linux import procfs
from tracer.linux.reaped_io import ReapedIO

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                    "reaped_io", "chain.json")


def _io(pid: int, text: str) -> ProcessIO:
    vals = {k: int(v) for k, _, v in (line.partition(": ") for line in text.splitlines())
            if k in ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes")}
    return ProcessIO(ts=0.0, pid=pid, **vals)


def _steps() -> List[Tuple[str, List[dict]]]:
    with open(DATA) as f:
        rows = json.load(f)
    steps: Dict[str, List[dict]] = {}
    for r in rows:
        steps.setdefault(r["step"], []).append(r)
    return list(steps.items())


def _replay(ledger: ReapedIO, readings: List[dict], gone: Dict[int, bool],
            stat_of: Optional[Dict[int, str]] = None) -> Dict[int, ProcessIO]:
    """Each reading of a step through the ledger as the proc backend does: a process whose stat
    is gone is ``ended``; ``is_gone`` answers from the same step."""
    out = {}
    for r in readings:
        pid = r["pid"]
        stat = (stat_of or {}).get(pid, r["stat"])
        if stat is None:
            ledger.ended(pid)
            continue
        st = procfs.parse_stat(stat.encode(), children=True)
        out[pid] = ledger.own(_io(pid, r["io"]), st, lambda p: gone.get(p, False))
    return out


def _run() -> Tuple[int, List[Dict[int, ProcessIO]], List[Dict[int, ProcessIO]]]:
    ledger, owns, raws = ReapedIO(), [], []
    root = None
    for _, readings in _steps():
        root = root or readings[0]["pid"]
        gone = {r["pid"]: r["stat"] is None for r in readings}
        owns.append(_replay(ledger, readings, gone))
        raws.append({r["pid"]: _io(r["pid"], r["io"]) for r in readings if r["io"]})
    return root, owns, raws


def test_the_kernel_adds_reaped_children_to_the_reaper():
    root, _, raws = _run()
    assert raws[-1][root].wchar - raws[0][root].wchar == 15_019   # 5 + 10,007 (L) + 5,007


def test_a_subreapers_own_output_is_what_it_wrote_itself():
    root, owns, _ = _run()
    assert [o[root].wchar - owns[0][root].wchar for o in owns] == [0, 2, 3, 3, 4, 5]
    assert owns[-1][root].syscw - owns[0][root].syscw == 4          # its four writes


def test_a_child_that_reaped_its_own_child_keeps_only_its_own():
    _, owns, raws = _run()
    launcher = sorted(raws[0])[1]                  # R, L, H in pid order
    assert raws[1][launcher].wchar == 10_007       # its b"r" and H's 10,006
    assert owns[1][launcher].wchar == 1


def test_a_reap_between_the_io_and_the_stat_read_is_paid_on_the_next_reading():
    """R's io read before it reaped L, its stat after (cminflt moved): nothing to take from
    that reading, L's counters are taken from the next one."""
    steps = _steps()
    ledger = ReapedIO()
    root = steps[0][1][0]["pid"]
    for _, readings in steps[:2]:
        _replay(ledger, readings, {r["pid"]: r["stat"] is None for r in readings})
    step2, step3 = steps[1][1], steps[2][1]
    stat3 = next(r["stat"] for r in step3 if r["pid"] == root)
    early = _replay(ledger, [r for r in step2 if r["pid"] == root],
                    {r["pid"]: r["stat"] is None for r in step3}, {root: stat3})
    later = _replay(ledger, [r for r in step3 if r["pid"] == root],
                    {r["pid"]: r["stat"] is None for r in step3})
    first = _replay(ReapedIO(), [steps[0][1][0]], {})[root]
    assert early[root].wchar - first.wchar == 2
    assert later[root].wchar - first.wchar == 3


def test_own_counters_never_fall_and_never_outgrow_the_raw_ones():
    _, owns, raws = _run()
    for pid in raws[0]:
        seen = [(o[pid], r[pid]) for o, r in zip(owns, raws) if pid in o]
        for (o1, r1), (o2, r2) in zip(seen, seen[1:]):
            for k in ("rchar", "wchar", "syscr", "syscw"):
                assert 0 <= getattr(o2, k) - getattr(o1, k) <= getattr(r2, k) - getattr(r1, k)


def test_a_reap_moves_the_children_fields_of_stat_and_nothing_else_does():
    """The trigger: R's cminflt + cmajflt + cutime + cstime moved at each of its three reaps
    (steps 3, 5, 6) and at no other step; its own fault and CPU fields are not the children's
    (the child's minflt goes to cminflt: R's minflt grew less than L's at its reap)."""
    steps = _steps()
    root = steps[0][1][0]["pid"]
    stats = [procfs.parse_stat(next(r for r in rs if r["pid"] == root)["stat"].encode(),
                               children=True)
             for _, rs in steps]
    moved = [b.children != a.children for a, b in zip(stats, stats[1:])]
    assert moved == [False, True, False, True, True]
    launcher = procfs.parse_stat(next(r for r in steps[1][1] if r["pid"] != root)["stat"].encode(),
                                children=True)
    grew = stats[2].minflt - stats[1].minflt
    assert stats[2].children - stats[1].children >= launcher.minflt > grew
