"""The last call of each thread of an strace log: the calls the converter holds until it knows
whether the thread went on after them.

Contract: ``LastCalls`` is a mixin of ``convert.StraceConverter`` (it reads the converter's
``_pending``, ``lines``, ``_has_ts``, ``_tid_pid`` and ``unfinished_tid``, which convert.py owns
and documents; its own state is set up by ``_init_last_calls``):
- a 'cut' entry (lines.py: the call's line ends there) is pending like an ``<unfinished ...>``
  half and listed in ``_cut_entries``; ``_drop_cut(tid)`` drops one that was not strace's;
- ``_hold(...)`` keeps a call a signal interrupted until ``_release_interrupted(tid, out)``;
- ``_last_calls(end)`` (at ``finish``): every pending and held call as an ``ongoing`` event;
  ``cut_calls`` lists them by tid as ``(tid, name, how)``, how "cut" or "interrupted".
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from .. import events as ev

__all__ = ["LastCalls"]

# (start, pid, name, args, err, ret_text, dur, end) of a call a signal interrupted
Held = Tuple[float, int, str, str, str, Optional[str], Optional[float], float]


class LastCalls:
    """The held last calls of StraceConverter (module doc)."""

    def _init_last_calls(self) -> None:
        self._cut_entries: Set[int] = set()      # tids whose pending call is a 'cut' line
        self._interrupted: Dict[int, Held] = {}  # tid -> a call ended by = ? ERESTART*, held
        self._entered: Dict[int, int] = {}       # tid -> lines fed when its last call began
        self.cut_calls: List[Tuple[int, str, str]] = []   # (tid, name, how), from finish()

    def _drop_cut(self, tid: int) -> None:
        """The tid's pending 'cut' entry was not strace's: a line of the tid came after it (strace
        writes an entry alone only as the end of a thread's output): it leaves ``_pending`` and
        counts as an unparsed line."""
        self._cut_entries.discard(tid)
        _, name, args = self._pending.pop(tid)  # type: ignore[attr-defined]
        self.lines -= 1  # type: ignore[attr-defined]
        self._count_bad(f"{name}({args}")  # type: ignore[attr-defined]

    def _hold(self, pid: int, tid: int, name: str, args: str, err: str,
              ret_text: Optional[str], start: float, end: float, dur: Optional[float]) -> None:
        """A call a signal interrupted (``= ? ERESTART...``): kept in ``_interrupted`` until the
        tid's next line."""
        if dur is None and self._has_ts:  # type: ignore[attr-defined]
            dur = max(0.0, end - start)
        self._interrupted[tid] = (start, pid, name, args, err, ret_text, dur, end)
        self._entered[tid] = self.lines  # type: ignore[attr-defined]
        self.unfinished_tid = tid

    def _release_interrupted(self, tid: int, out: List[ev.Event]) -> None:
        """The held call of ``tid`` as the complete call it was, handed to the converter's
        ``_complete`` once the tid's next line (not a signal) shows the thread went on."""
        start, pid, name, args, err, ret_text, dur, end = self._interrupted.pop(tid)
        self._complete(pid, tid, name, args, None, err, ret_text,  # type: ignore[attr-defined]
                       start, end, dur, out, False)

    def _last_calls(self, end: float) -> List[ev.Event]:
        """Every pending and held call as an ongoing event, in the order of their starts (ties: the
        order their lines came in), ``dur`` the time to ``end`` for a pending call, the call's own
        for an interrupted one (it ends at the signal), None in a log without timestamps. In
        ``cut_calls`` how is "cut" (in flight when the log ends) or "interrupted" (by a signal,
        nothing of the thread after)."""
        has_ts = self._has_ts  # type: ignore[attr-defined]
        last: List[Tuple[float, int, int, str, str, Optional[float], str]] = []
        pending: Dict[int, Tuple[float, str, str]] = self._pending  # type: ignore[attr-defined]
        for tid, (start, name, args) in pending.items():
            dur = max(0.0, end - start) if has_ts else None
            last.append((start, self._entered.get(tid, 0), tid, name, args, dur, "cut"))
        for tid, held in self._interrupted.items():
            last.append((held[0], self._entered.get(tid, 0), tid, held[2], held[3], held[6],
                         "interrupted"))
        out: List[ev.Event] = []
        tid_pid: Dict[int, int] = self._tid_pid  # type: ignore[attr-defined]
        for start, _, tid, name, args, dur, how in sorted(last, key=lambda c: c[:2]):
            out.append(self._event(tid_pid.get(tid, tid), tid,  # type: ignore[attr-defined]
                                   name, args.rstrip(", "), None, None, dur, start, True))
            self.cut_calls.append((tid, name, how))
        self.cut_calls.sort()
        pending.clear()
        self._interrupted.clear()
        self._cut_entries.clear()
        return out
