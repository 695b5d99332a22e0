"""Where ``attach``'s start goes, phase by phase, in one process: the command run in-process
(``tracer.cli.main``) with the recording path's steps wrapped in timers, printed as seconds
from this script's start (the interpreter's own start-up is before it; ``-X importtime``
says what the imports cost). The phases: the CLI's imports, the backends chosen (NVML's and
libcuda's checks among them), the targets found, each backend's start, the trace's header.

Usage: python bench/attach_phases.py [--backend ebpf|proc] [--reps R]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, List, Tuple

T0 = time.monotonic()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
MARKS: List[Tuple[float, str]] = []


def mark(name: str) -> None:
    MARKS.append((time.monotonic() - T0, name))


def wrap(owner: object, attr: str, name: str) -> None:
    """Time every call of owner.attr (a function or method) as 'name'."""
    f: Callable = getattr(owner, attr)

    def timed(*a, **k):  # type: ignore[no-untyped-def]
        t = time.monotonic()
        try:
            return f(*a, **k)
        finally:
            MARKS.append((t - T0, f"{name} {1000 * (time.monotonic() - t):.1f} ms"))
    setattr(owner, attr, timed)


def instrument() -> None:
    import tracer.cli.commands  # noqa: F401
    mark("cli imported")
    from tracer.record import session as S
    from tracer.record.backends import nvml_backend as N, proc_backend as P
    from tracer.record.backends.ebpf import backend as E, cuda_uprobes as C
    mark("record path imported")
    for owner, attr, name in [
            (S, "resolve_targets", "resolve_targets"), (S, "choose_backends", "choose_backends"),
            (N.NvmlBackend, "check", "nvml.check"), (N.NvmlBackend, "start", "nvml.start"),
            (C.CudaUprobeBackend, "check", "cuda-uprobes.check"),
            (C.CudaUprobeBackend, "start", "cuda-uprobes.start"),
            (E.EbpfBackend, "check", "ebpf.check"), (E.EbpfBackend, "start", "ebpf.start"),
            (P.ProcBackend, "start", "proc.start"), (S, "plan_targets", "plan_targets"),
            (S, "run_probes", "start probes"), (S.Session, "_open_trace", "header+analyzer"),
            (S, "make_header", "make_header"), (S.TraceWriter, "__init__", "header written")]:
        if hasattr(owner, attr):
            wrap(owner, attr, name)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="ebpf")
    a = p.parse_args()
    instrument()
    target = subprocess.Popen(["sleep", "30"])
    out = os.path.join(tempfile.mkdtemp(), "phases.htrace.gz")
    sys.argv = ["hangtrace", "attach", "-p", str(target.pid), "-d", "0.3", "-b", a.backend,
                "-o", out, "--json"]
    from tracer.cli import main as cli_main
    mark("attach command")
    stdout = sys.stdout
    try:
        sys.stdout = open(os.devnull, "w")
        cli_main()
    except SystemExit:
        pass
    finally:
        sys.stdout = stdout
        target.kill()
    for t, name in sorted(MARKS):
        if t < 1.5:
            print(f"{t:.3f}  {name}")


if __name__ == "__main__":
    main()
