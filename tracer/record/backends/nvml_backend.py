"""The NVML backend: per-GPU utilization, memory and compute pids, sampled beside the others.

Contract (on top of backends/base.py):
- ``check()``: None when NVML may open here (gpu/nvml.py ``nvml_problem``: found without
  opening it), else one line why not; never raises.
- ``start()`` starts one daemon thread that opens NVML and emits a ``GpuSample`` per GPU
  (every GPU, not only the targets') every ``1 / rate_hz`` seconds; it never touches the target
  processes, and NVML's opening never delays the recording's start.
- Where NVML has ``health(ts, phase)`` (gpu/nvml.py), one ``GpuHealth`` per GPU at the start
  and at the end: ``END_LEAD_S`` before the window's end (``window_ends_at``), else in ``stop()``.
- ``stop()`` is idempotent and returns when the thread has ended and NVML is shut down.
  ``opener`` and ``probe`` replace gpu/nvml.py's ``open_nvml`` and ``nvml_problem`` (tests).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from ...gpu.nvml import nvml_problem, open_nvml
from .base import Backend, Emit, TargetSet


END_LEAD_S = 0.5       # the end's health read this long before the window's end


class NvmlBackend(Backend):
    name = "nvml"

    def __init__(self, rate_hz: float = 2.0, opener: Callable[[], Any] = open_nvml,
                 probe: Callable[[], Optional[str]] = nvml_problem) -> None:
        super().__init__()
        self.interval = 1.0 / max(rate_hz, 0.1)
        self._opener = opener
        self._probe = probe
        self._nv: Any = None
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._emit: Optional[Emit] = None
        self._end_at: Optional[float] = None     # time.monotonic() of the window's end
        self._end_read = False                   # the "end" health emitted

    def check(self) -> Optional[str]:
        """None when NVML may open here, else one line why not (no driver, no library, no
        bindings); it never raises. Found without opening NVML: an open and a shutdown cost
        30 ms on a GPU host before the recording's first byte. An NVML that still fails to
        open (a driver and library of different versions) is said by ``start``'s thread."""
        try:
            return self._probe()
        except Exception as exc:  # a broken library must not break attach
            return f"NVML unusable: {exc}"

    def sample_once(self, emit: Emit) -> int:
        """One round of readings (also used by tests); returns how many were emitted."""
        samples = self._nv.read(time.time())
        for s in samples:
            emit(s)
        return len(samples)

    def _health(self, emit: Emit, phase: str) -> None:
        health = getattr(self._nv, "health", None)
        if health is None:
            return
        try:
            for h in health(time.time(), phase):
                emit(h)
        except Exception as exc:   # health is extra evidence: never lose the recording for it
            self.errors.append(f"NVML health read failed: {exc}")

    def window_ends_at(self, at: float) -> None:
        """The sampling thread reads the end's health ``END_LEAD_S`` before ``at``."""
        self._end_at = at

    def _end_due(self) -> bool:
        return self._end_at is not None and time.monotonic() >= self._end_at - END_LEAD_S

    def start(self, targets: TargetSet, emit: Emit) -> None:
        """Start one daemon thread that opens NVML, emits the start's ``GpuHealth`` and then a
        ``GpuSample`` per GPU every ``1 / rate_hz`` seconds (the first at once): opening NVML and
        reading its health (tens of ms on a GPU host) never delay the recording's start; an NVML
        that fails to open there is said in ``errors``. It never touches the target processes:
        NVML reads the driver. Readings of every GPU are emitted, not only those the targets use:
        the analysis (tracer/analysis/threads/gpu.py) matches ``pids`` with the traced processes."""
        self._emit = emit
        self._stop.clear()
        self._end_read = False

        def loop() -> None:
            try:
                self._nv = self._opener()
            except Exception as exc:  # noqa: BLE001 - the recording goes on without the GPU
                self.errors.append(f"NVML could not be opened: {exc}")
                return
            self._health(emit, "start")
            failures = 0
            while not self._stop.is_set():
                try:
                    self.sample_once(emit)
                except Exception as exc:
                    failures += 1
                    if failures == 1:
                        self.errors.append(f"NVML read failed: {exc}")
                    if failures >= 3:
                        return
                if not self._end_read and self._end_due():
                    self._health(emit, "end")
                    self._end_read = True
                wait = self.interval
                if not self._end_read and self._end_at is not None:
                    wait = min(wait, max(0.0, self._end_at - END_LEAD_S - time.monotonic()))
                self._stop.wait(wait)

        self._thread = threading.Thread(target=loop, name="hangtrace-nvml", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None:
            t.join(timeout=5)
        if self._nv is not None and self._emit is not None and not self._end_read:
            self._health(self._emit, "end")
            self._end_read = True
        nv, self._nv = self._nv, None
        if nv is not None:
            try:
                nv.close()
            except Exception as exc:
                self.errors.append(f"NVML shutdown failed: {exc}")
