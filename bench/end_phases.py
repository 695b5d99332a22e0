"""Where the time goes between the window's end and the report of ``hangtrace attach``, phase by
phase, in one process: the command run in-process (``tracer.cli.main``) on the 8-GPU tree
(fixtures/scenarios/tp8_server.py) with the end's steps wrapped in timers. Each phase is
printed with its start and end in seconds from the window's end, its wall time, the process's
CPU seconds (every thread) and the calling thread's own CPU seconds during it; the window
thread's probes the same (they run beside the recording's thread).

Usage: python bench/end_phases.py [--backend ebpf|proc|strace] [--load N] [--duration S]
  --load N: N processes ``while 1: pass`` beside the tree (4: two a core on 2 cores).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
SPAN: List[Tuple[float, float, float, float, str, str]] = []   # t0, t1, cpu, tcpu, thread, name
WINDOW_END = [0.0]


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def wrap(owner: object, attr: str, name: str) -> None:
    """Time every call of owner.attr as 'name'."""
    f: Callable = getattr(owner, attr)

    def timed(*a, **k):  # type: ignore[no-untyped-def]
        t, c, tc = time.monotonic(), _cpu(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            SPAN.append((t, time.monotonic(), _cpu() - c, time.thread_time() - tc,
                         threading.current_thread().name, name))
    setattr(owner, attr, timed)


def timed_probe(probe: Callable) -> Callable:
    from tracer.record.probe_run import probe_name

    def run(pids, analyzer):  # type: ignore[no-untyped-def]
        t, c, tc = time.monotonic(), _cpu(), time.thread_time()
        try:
            return list(probe(pids, analyzer))
        finally:
            SPAN.append((t, time.monotonic(), _cpu() - c, time.thread_time() - tc,
                         threading.current_thread().name, "probe " + probe_name(probe)))
    for k, v in vars(probe).items():
        setattr(run, k, v)
    run.__name__ = probe_name(probe)
    return run


def instrument() -> None:
    import tracer.cli.commands  # noqa: F401
    from tracer.cli import live_cmds, options
    from tracer.record import ending as E, session as S
    from tracer.tracefile import format as F
    from tracer.analysis import analyzer as A
    from tracer.render import console as R
    real_run = E.run_probes

    def run_probes(probes, *a, **k):  # type: ignore[no-untyped-def]
        return real_run([timed_probe(p) for p in probes], *a, **k)
    E.run_probes = run_probes
    real_over = S.Session.loop

    def loop(self, *a, **k):  # type: ignore[no-untyped-def]
        WINDOW_END[0] = self.began + self.duration
        return real_over(self, *a, **k)
    S.Session.loop = loop
    for owner, attr, name in [
            (S, "_stop_all", "stop backends"), (S.Inbox, "drain", "drain inbox"),
            (E, "final_infos", "last look"), (E.Ending, "late", "ending.late"),
            (E.Ending, "_take_window", "take window part"),
            (F.TraceWriter, "close", "trace close"), (S.Session, "close", "session.close"),
            (A.Analyzer, "report", "analysis"), (R, "render_report", "render"),
            (options, "show", "show")]:
        wrap(owner, attr, name)
    live_cmds.show = options.show
    from tracer.record.backends import proc_backend as P, strace_backend as ST
    from tracer.record.backends.ebpf import backend as EB, core_loader as CL
    for owner, attr, name in [
            (P.ProcBackend, "stop", "proc stop"), (ST.StraceBackend, "stop", "strace stop"),
            (EB.EbpfBackend, "stop", "ebpf stop"), (EB.EbpfBackend, "_drain_rest", "ebpf drain"),
            (EB.EbpfBackend, "_final_events", "ebpf final events"),
            (EB.EbpfBackend, "_cleanup", "ebpf cleanup"), (CL.CoreProgram, "detach", "ebpf detach")]:
        if hasattr(owner, attr):
            wrap(owner, attr, name)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="ebpf")
    p.add_argument("--load", type=int, default=0)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--profile", type=int, default=0, help="print the N costliest functions of "
                   "the main thread from the window's end to the report (cProfile)")
    a = p.parse_args()
    from report_time import SPIN, start_tree
    tree, launcher, _ = start_tree()
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(a.load)]
    time.sleep(2.0 if a.load else 0.0)
    instrument()
    prof = None
    if a.profile:
        import cProfile
        from tracer.record import session as S
        prof = cProfile.Profile()
        real_close = S.Session.close

        def close(self):  # type: ignore[no-untyped-def]
            prof.enable()
            return real_close(self)
        S.Session.close = close
    out = os.path.join(tempfile.mkdtemp(), "phases.htrace.gz")
    sys.argv = ["hangtrace", "attach", str(launcher), "-d", f"{a.duration:g}", "-b", a.backend,
                "-o", out]
    from tracer.cli import main as cli_main
    stdout = sys.stdout
    load = os.getloadavg()[0]
    try:
        sys.stdout = open(os.devnull, "w")
        cli_main(standalone_mode=False)
    except SystemExit:
        pass
    finally:
        sys.stdout.close()
        sys.stdout = stdout
        done = time.monotonic()
        if prof is not None:
            prof.disable()
        for s in spinners:
            s.kill()
        os.killpg(tree.pid, signal.SIGKILL)
    end = WINDOW_END[0]
    if prof is not None:
        import pstats
        st = pstats.Stats(prof); st.sort_stats("tottime").print_stats(a.profile); st.print_callers("read_checked")
    print(f"backend {a.backend}, load {a.load} more (1-min load before {load:.1f}); "
          f"report done {done - end:.2f} s after the window's end")
    print(f"{'start':>6} {'end':>6} {'wall':>5} {'cpu':>5} {'tcpu':>5}  thread / phase")
    for t0, t1, c, tc, th, name in sorted(SPAN):
        if t1 >= end - a.duration / 2:
            print(f"{t0 - end:6.2f} {t1 - end:6.2f} {t1 - t0:5.2f} {c:5.2f} {tc:5.2f}  "
                  f"{th[:18]:18} {name}")


if __name__ == "__main__":
    main()
