#!/usr/bin/env python3
"""How well hangtrace's line templates (tracer/record/probes/log_lines.line_template: numbers,
times and hex masked) group log lines, against drain3, on loghub's labelled 2k samples.

usage: python bench/log_templates.py LOGHUB_DIR [--json]
       (LOGHUB_DIR: a checkout of github.com/logpai/loghub; drain3 importable for its column)

For each dataset (DIR/NAME/NAME_2k.log_structured.csv: each line's Content and its
ground-truth EventId) it reports the grouping accuracy (loghub's measure: the share of lines
whose predicted group holds exactly the lines of their true event), the number of groups
against the true number of events, how many groups mix lines of several events, and the time
per line, for:
- ``mask``: line_template of the Content (hangtrace's own reduction);
- ``mask+line``: line_template of the whole raw line (what hangtrace sees in a log file: the
  header's timestamps and pids included), grouped the same way;
- ``drain3``: drain3's TemplateMiner with its defaults over the Content (if importable).
hangtrace uses the templates to tell a heartbeat (one shape repeated with the same numbers)
from news: over-splitting one event into several groups makes a heartbeat look like news,
over-merging events hides news. A low ``mask`` figure on a dataset says which.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections import defaultdict
from typing import Callable, Dict, List, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tracer.record.probes.log_lines import line_template  # noqa: E402


def grouping_accuracy(truth: Sequence[str], predicted: Sequence[str]) -> float:
    """loghub's GA: lines whose predicted group is exactly their true group, over all lines."""
    by_true: Dict[str, set] = defaultdict(set)
    by_pred: Dict[str, set] = defaultdict(set)
    for i, (t, p) in enumerate(zip(truth, predicted)):
        by_true[t].add(i)
        by_pred[p].add(i)
    good = sum(len(ids) for ids in by_pred.values()
               if by_true[truth[next(iter(ids))]] == ids)
    return good / max(len(truth), 1)


def merged_groups(truth: Sequence[str], predicted: Sequence[str]) -> int:
    """Predicted groups that hold lines of two or more true events (news hidden in a shape)."""
    events: Dict[str, set] = defaultdict(set)
    for t, p in zip(truth, predicted):
        events[p].add(t)
    return sum(1 for e in events.values() if len(e) > 1)


def _drain3() -> Callable[[List[str]], List[str]]:
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    def groups(lines: List[str]) -> List[str]:
        cfg = TemplateMinerConfig()
        cfg.profiling_enabled = False
        miner = TemplateMiner(config=cfg)
        ids = [miner.add_log_message(line)["cluster_id"] for line in lines]
        return [str(i) for i in ids]     # a line's cluster as drain3 assigned it then
    return groups


def _mask(lines: List[str]) -> List[str]:
    return [line_template(line)[0] for line in lines]


def measure(name: str, rows: List[dict], raw: List[str], drain3) -> Dict[str, object]:
    truth = [r["EventId"] for r in rows]
    out: Dict[str, object] = {"dataset": name, "lines": len(rows), "events": len(set(truth))}
    runs = [("mask", _mask, [r["Content"] for r in rows]), ("mask+line", _mask, raw)]
    if drain3 is not None:
        runs.append(("drain3", drain3, [r["Content"] for r in rows]))
    for label, fn, lines in runs:
        t0 = time.perf_counter()
        pred = fn(lines)
        us = (time.perf_counter() - t0) / max(len(lines), 1) * 1e6
        out[label] = {"ga": round(grouping_accuracy(truth, pred), 3),
                      "groups": len(set(pred)), "merged": merged_groups(truth, pred),
                      "us_per_line": round(us, 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("loghub")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        drain3 = _drain3()
    except ImportError:
        drain3 = None
    results = []
    for name in sorted(os.listdir(a.loghub)):
        csv_path = os.path.join(a.loghub, name, f"{name}_2k.log_structured.csv")
        log_path = os.path.join(a.loghub, name, f"{name}_2k.log")
        if not (os.path.exists(csv_path) and os.path.exists(log_path)):
            continue
        with open(csv_path, newline="", encoding="utf-8", errors="replace") as f:
            rows = list(csv.DictReader(f))
        with open(log_path, encoding="utf-8", errors="replace") as f:
            raw = f.read().splitlines()
        if len(raw) != len(rows):
            continue
        results.append(measure(name, rows, raw, drain3))
    if a.json:
        print(json.dumps(results, indent=1))
        return
    cols = ["mask", "mask+line"] + (["drain3"] if drain3 is not None else [])
    print(f"{'dataset':12} {'events':>6}  "
          + "  ".join(f"{c + ' GA/groups/merged':>26}" for c in cols))
    for r in results:
        cells = [f"{r[c]['ga']:.3f} / {r[c]['groups']:>4} / {r[c]['merged']:>3}".rjust(26)
                 for c in cols]
        print(f"{r['dataset']:12} {r['events']:>6}  " + "  ".join(cells))
    for c in cols:
        mean = sum(r[c]["ga"] for r in results) / max(len(results), 1)
        us = sorted(r[c]["us_per_line"] for r in results)[len(results) // 2]
        merged = sum(r[c]["merged"] for r in results)
        print(f"mean GA {c}: {mean:.3f}; groups holding several events: {merged}; "
              f"median {us} us a line")


if __name__ == "__main__":
    main()
