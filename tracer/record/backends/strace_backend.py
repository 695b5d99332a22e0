"""Live recording backend: runs strace on the target pids and streams its output as events.

Contract (see base.py): ``check()`` says whether strace can run here; ``start(targets, emit)``
attaches strace (``STRACE_ARGS``) to every pid of ``targets`` and returns; a reader thread
parses strace's output as it streams (strace/lines.py, strace/convert.py) and calls ``emit``;
processes the tracees fork are added to ``targets``. ``stop()`` makes strace detach (SIGINT;
SIGKILL only as a last resort), joins the reader, emits the converter's final events (calls
still blocked become ``ongoing``), then nothing more; it is idempotent. If strace exits by
itself (every tracee gone) the reader emits the final events and the backend is stopped. A
thread strace could not attach to becomes an ``ObserveError`` event (``parse_attach_error``).
The strace facts relied on: ``StraceBackend.start`` and ``StraceBackend.stop``.
"""
from __future__ import annotations

import ctypes
import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time
from typing import IO, Dict, List, Optional, Set, Tuple

from ... import events as ev
from ...linux import procfs
from ...strace.convert import StraceConverter
from .base import Backend, Emit, TargetSet
from .in_flight import (in_flight_events, uninterruptible_calls, uninterruptible_samples,
                        unseen_calls)
from .strace_attach import never_attached, wait_attached
from ...linux.mounts import fuse_users

__all__ = ["StraceBackend", "ptrace_problem", "parse_attach_error"]

_PR_SET_PDEATHSIG = 1
STRACE_ARGS = ["-f", "-ttt", "-T", "-yy", "-s", "0", "-q"]
KILL_WAIT_S = 5.0           # how long a SIGKILLed strace is waited for (StraceBackend._reap)
ATTACH_WAIT_S = 30.0        # how long the window waits for strace to attach every target
DETACH_S_PER_TASK = 0.002   # the wait for strace's exit after SIGINT grows by this a target
KILL_AFTER_MAX_S = 30.0     # and is never longer (StraceBackend._detach_wait)


def strace_args(fuse_users: List[int]) -> List[str]:
    """``STRACE_ARGS``, with -y for -yy when a target uses FUSE (linux/mounts.fuse_users): -yy
    stats every path it prints (for a device's numbers); a stat of a file on a FUSE mount waits
    for its daemon, uninterruptibly once the daemon has read the request, so a daemon strace
    holds stopped, or one that hangs, would leave strace unkillable and its tracees stopped
    (seen with strace 6.1: strace in fuse_do_getattr, both tracees in ptrace_stop)."""
    return [("-y" if a == "-yy" and fuse_users else a) for a in STRACE_ARGS]


def _elided(argv: List[str]) -> bool:
    """True for an argv strace printed without its strings (-s 0: ``[""..., ""...]``)."""
    return not argv or any(a.endswith("...") for a in argv)


def ptrace_problem() -> Optional[str]:
    """Why ptrace attach would fail here (Yama LSM policy vs our privileges), or None."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            scope = int(f.read().strip())
    except (OSError, ValueError):
        return None                  # no Yama: classic rules (same uid or CAP_SYS_PTRACE)
    if scope >= 3:
        return "ptrace is disabled on this host (kernel.yama.ptrace_scope=3, needs a reboot)"
    if scope >= 1 and not _has_cap_sys_ptrace():
        return (f"kernel.yama.ptrace_scope={scope}: attaching to a running process needs root "
                "(run with sudo) or CAP_SYS_PTRACE" + (" (this root lacks it, as in a container: "
                "docker run --cap-add SYS_PTRACE, or a pod's securityContext.capabilities.add "
                "[SYS_PTRACE])" if os.geteuid() == 0 else ""))
    return None


def _has_cap_sys_ptrace() -> bool:
    """CAP_SYS_PTRACE in effect (root in a container may lack it, whatever its euid)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> 19 & 1)
    except (OSError, ValueError, IndexError):
        pass
    return os.geteuid() == 0


def _strace_child_setup() -> None:
    """Runs in the strace child before exec.

    - PR_SET_PDEATHSIG: die (and so detach) if hangtrace dies. It fires when the *thread* that
      forked the child exits, so ``start`` must be called from a thread that lives as long as
      the recording (the CLI's main thread).
    - Its own process group: a terminal's Ctrl-C reaches hangtrace only (which stops strace
      with SIGINT itself, on every path), and ``stop`` can kill whatever strace left behind:
      strace forks a test child at start-up (pause() until strace kills it); if strace dies
      in that window, the child would otherwise live on forever, orphaned.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    os.setpgid(0, 0)


_ATTACH_ERROR = re.compile(r"attach: ptrace\((PTRACE_\w+), (\d{1,10})\): (.+)$")


def parse_attach_error(msg: str) -> Optional[Tuple[int, str, bool]]:
    """(tid, why, denied) from strace's "attach: ptrace(PTRACE_SEIZE, 12): Operation not
    permitted"; None for any other message. ``denied``: EPERM/EACCES (not: the thread was
    gone, "No such process").
    A thread strace could not attach to ("attach: ptrace(PTRACE_SEIZE, 2): Operation not
    permitted") becomes an ``ObserveError`` event, saved in the trace: it was never observed and
    must not be judged as if it had been quiet."""
    m = _ATTACH_ERROR.search(msg)
    if m is None:
        return None
    why = m.group(3).strip()
    denied = why in ("Operation not permitted", "Permission denied")
    return int(m.group(2)), f"ptrace({m.group(1)}): {why}", denied


class StraceBackend(Backend):
    name = "strace"

    def __init__(self, strace_path: Optional[str] = None, stop_timeout: float = 2.0) -> None:
        super().__init__()
        self._strace = strace_path
        self._stop_timeout = stop_timeout
        self._proc: Optional[subprocess.Popen] = None
        self._reader: Optional[threading.Thread] = None
        self._err_reader: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()     # set once the final events are out
        self._stopping = False
        self._emit: Optional[Emit] = None
        self._targets: Optional[TargetSet] = None
        self._tgid_cache: Dict[int, Optional[int]] = {}
        self.converter: Optional[StraceConverter] = None
        self.lines = 0
        self._start_ts = 0.0
        # the threads in D state at the start and at stop (in_flight.py); of those at stop, the
        # /proc syscall line of each inside a call
        self._d_start: Dict[Tuple[int, int], ev.ThreadSample] = {}
        self._d_stop: Dict[Tuple[int, int], ev.ThreadSample] = {}
        self._in_d: Dict[Tuple[int, int], str] = {}
        self._unattached: List[int] = []      # targets strace had not attached at the start
        self._attach_failed: Set[int] = set()  # pids/tids strace said it could not attach
        self._seen: Set[Optional[int]] = set()  # the tids of the events read (in_flight.py)

    # ------------------------------------------------------------------ contract
    def check(self) -> Optional[str]:
        path = self._strace or shutil.which("strace")
        if not path:
            return "strace is not installed (apt install strace / dnf install strace)"
        return ptrace_problem()

    def start(self, targets: TargetSet, emit: Emit) -> None:
        """Attach ``strace -f -ttt -T -yy -s 0 -q`` (``STRACE_ARGS``) to every pid of ``targets``
        and return; a reader thread streams events. strace runs in its own process group, killed
        once strace has exited, so that nothing of it (its start-up test child included) outlives
        stop(). strace facts relied on:

        - ``-s 0`` prints no buffer contents at all (strings as ``""...``): nothing to leak, less
        to parse. exec argv is therefore read from /proc/PID/cmdline instead.

        - ``-q`` hides attach/detach chatter but keeps ``+++ exited with N +++`` (``-qq`` would
        drop those, and with them ProcessExit).

        - ``-X`` is left at its default: ioctl requests print as ``_IOC(...)`` or a known name,
        both decodable (decode.py), and futex ops stay symbolic.

        - ``-o /dev/fd/N`` (a pipe): not line-buffered, but strace (6.1) flushes at each line's
        end (line_ended -> fflush) and after a call's entry, so lines arrive as printed (each
        of its write(2)s one line or entry, traced) and a SIGKILLed strace loses none."""
        if self._proc is not None:
            raise RuntimeError("StraceBackend.start called twice")
        path = self._strace or shutil.which("strace") or "strace"
        targets.discover()              # once per recording (record/targets.py)
        # just before ptrace: a pid another process took since discovery is not attached
        self.errors.extend(line for _, line in targets.drop_reused())
        pids = targets.pids()
        if not pids:
            raise ValueError("no target pids")
        self._emit = emit
        self._targets = targets
        self._start_ts = time.time()
        self.converter = StraceConverter(pid_of=self._pid_of)
        fuse = fuse_users(pids)
        if fuse:
            self.notes.append(
                f"strace -y, not -yy: {'pids' if len(fuse) > 1 else 'pid'} "
                f"{', '.join(map(str, fuse[:4]))} use{'' if len(fuse) > 1 else 's'} FUSE (a "
                "file on a FUSE mount, or /dev/fuse), and -yy stats the files it prints, which "
                "can wait for ever on the daemon; sockets show without their addresses")
        read_fd, write_fd = os.pipe()
        cmd = [path, *strace_args(fuse), "-o", f"/dev/fd/{write_fd}"]
        for pid in pids:
            cmd += ["-p", str(pid)]
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, pass_fds=(write_fd,), preexec_fn=_strace_child_setup,
                close_fds=True)
        finally:
            # Our copy of the write end must go, or the reader never sees EOF.
            os.close(write_fd)
        out = os.fdopen(read_fd, "r", encoding="utf-8", errors="surrogateescape", newline="")
        self._reader = threading.Thread(target=self._read_trace, args=(out,),
                                        name="hangtrace-strace-reader", daemon=True)
        self._err_reader = threading.Thread(target=self._read_errors,
                                            args=(self._proc.stderr,),
                                            name="hangtrace-strace-stderr", daemon=True)
        self._err_reader.start()      # first: the reader joins it when strace exits
        self._reader.start()
        # the window opens once strace has attached (strace_attach.py), at most ATTACH_WAIT_S
        self._unattached = wait_attached(self._proc.pid, pids, time.monotonic() + ATTACH_WAIT_S,
                                         self._proc, self._attach_failed)

    def helpers(self) -> List[int]:
        """strace's pid while it runs (base.py)."""
        proc = self._proc
        return [proc.pid] if proc is not None and proc.poll() is None else []

    def stop(self) -> None:
        """Make strace detach, join the reader, emit the final events; idempotent. On
        SIGINT strace detaches every tracee (PTRACE_DETACH resumes them) and exits; a tracee
        is never left in a ptrace stop. It detaches them one at a time, each first interrupted
        and waited for until it stops, so that each must get a CPU: 800 threads took 2-3 s
        beside 4 busy processes on 2 cores. After ``_detach_wait()`` (it grows with the
        targets) it is SIGKILLed, and the kernel detaches (and restarts) every tracee left at
        once as the tracer dies (ptrace(2); one in group-stop stays stopped, as it was); what
        strace printed is in the pipe already (``start``: -o). Said in the report only where
        threads in D state were left (``_kill_note``)."""
        with self._lock:
            if self._stopping:
                already = True
            else:
                already = False
                self._stopping = True
        if self._proc is None:          # never started (or its start failed): nothing to do
            self._stopped.set()
            return
        if already:
            self._stopped.wait(timeout=self._stop_timeout + 5)
            return
        proc = self._proc
        if proc.poll() is None:
            # threads inside a call that never returns (D state): strace cannot stop them to
            # detach, nor print their call; /proc shows it (in_flight.py)
            self._d_stop = uninterruptible_samples(self._targets.pids() if self._targets else [])
            if self._unattached and self._emit is not None:
                for e in never_attached(proc.pid, self._unattached):
                    self._emit(e)
            self._in_d = uninterruptible_calls(self._d_stop)
            try:
                proc.send_signal(signal.SIGINT)     # strace detaches every tracee, then exits
            except ProcessLookupError:
                pass
            try:
                _wait_exit(proc, self._detach_wait())
            except subprocess.TimeoutExpired:
                if self._d_stop:
                    self.errors.append(self._kill_note())
                proc.kill()
                self._reap(proc)
        self._kill_leftovers(proc)
        if self._reader is not None:
            self._reader.join(timeout=10)
        if self._err_reader is not None:
            self._err_reader.join(timeout=2)
        self._stopped.wait(timeout=5)

    def _detach_wait(self) -> float:
        """How long strace is given to detach and exit after SIGINT: ``stop_timeout`` and
        ``DETACH_S_PER_TASK`` a target (at most ``KILL_AFTER_MAX_S``): strace detaches one task
        at a time (5,001 processes on a busy VM took more than 2 s; issue 46 item 9). A kill
        loses no line (``start``: -o; 2,001 pause() processes, killed mid-detach: all kept)."""
        tasks = len(self._targets.pids()) if self._targets is not None else 0
        return min(max(self._stop_timeout, self._stop_timeout + DETACH_S_PER_TASK * tasks),
                   KILL_AFTER_MAX_S)

    def _reap(self, proc: subprocess.Popen) -> None:
        """Wait for a SIGKILLed strace, at most ``KILL_WAIT_S``: a strace asleep in the kernel
        where SIGKILL cannot reach (a stat of a file on a FUSE mount whose daemon has the
        request and never answers) dies only when that ends; hangtrace does not wait for it."""
        try:
            proc.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            self.errors.append(f"strace did not die within {KILL_WAIT_S:.0f} s of SIGKILL: it "
                               "sleeps in the kernel (D state) where no signal reaches it, and "
                               "its tracees stay stopped until that ends; hangtrace left it")

    def _kill_note(self) -> str:
        """Why strace had to be killed: the threads in D state it could not detach, if any."""
        head = f"strace did not exit within {self._detach_wait():g} s of SIGINT; killed it"
        if not self._d_stop:
            return head + " (the kernel detaches its tracees)"
        tids = sorted(tid for _, tid in self._d_stop)
        names = ", ".join(str(t) for t in tids[:8]) + (" ..." if len(tids) > 8 else "")
        one = len(tids) == 1
        return (f"{head}: thread{'' if one else 's'} {names} {'is' if one else 'are'} in "
                "uninterruptible sleep (D state), which takes no ptrace stop until the kernel "
                f"finishes, so strace could not detach {'it' if one else 'them'}; the kernel "
                f"detached {'it' if one else 'them'} when strace died: untraced now, still "
                "asleep (a call in flight is recorded from /proc/TID/syscall)")

    def _unseen_in_flight(self, conv: StraceConverter) -> List[ev.Event]:
        """The calls of the D-state threads strace never printed, and of the threads it printed
        nothing of at all that sit in a call (in_flight.unseen_calls): ongoing since the
        attach."""
        lines = {k: v for k, v in self._in_d.items() if not conv.in_call(k[1])}
        if self._targets is not None:
            unseen = unseen_calls(self._targets.pids(),
                                  lambda tid: tid in self._seen or tid in self._attach_failed
                                  or conv.in_call(tid))
            lines.update({k: v for k, v in unseen.items() if k not in lines})
        return list(in_flight_events(lines, self._start_ts, time.time()))

    @property
    def running(self) -> bool:
        return self._proc is not None and not self._stopped.is_set()

    @staticmethod
    def _kill_leftovers(proc: subprocess.Popen) -> None:
        """Kill what is left of strace's process group once strace itself has exited: its
        start-up test child, orphaned when strace dies early (``_strace_child_setup``). Right
        after strace was reaped its pid cannot have been reused as a group id."""
        if proc.returncode is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        # SIGKILL is delivered asynchronously and the orphan is reaped by init: wait (at most
        # 2 s) until the group is gone, so that stop() returns with nothing of strace's left.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.01)

    # ------------------------------------------------------------------ threads
    def _pid_of(self, tid: int) -> Optional[int]:
        # A tid whose clone we did not see (threads that existed before attach): ask /proc.
        # Cached: tids are not reused while the process lives, and lookups are per first sight.
        if tid not in self._tgid_cache:
            self._tgid_cache[tid] = procfs.tgid_of(tid)
        return self._tgid_cache[tid]

    def _read_trace(self, out: IO[str]) -> None:
        conv = self.converter
        assert conv is not None and self._emit is not None and self._targets is not None
        emit = self._emit
        targets = self._targets
        seen = self._seen
        # a thread in D state takes no ptrace stop: strace shows nothing of it; its /proc
        # samples at both ends say it slept (not "outside syscalls", not a CPU spin). Read
        # here, not in start(): the attach does not wait for it (0.2 s for 1,000 threads)
        self._d_start = uninterruptible_samples(targets.pids())
        for s in self._d_start.values():
            emit(s)
        try:
            for text in out:
                self.lines += 1
                for e in conv.feed_text(text):
                    seen.add(getattr(e, "tid", None))
                    if isinstance(e, ev.ThreadStart) and e.new_process:
                        targets.add(e.pid)
                    elif isinstance(e, ev.ProcessExec) and _elided(e.argv):
                        # -s 0 prints argv as ""...: the exec has completed, so /proc has it
                        e.argv = procfs.read_cmdline(e.pid) or e.argv
                        try:
                            e.filename = os.readlink(f"/proc/{e.pid}/exe")
                        except OSError:
                            pass
                    elif isinstance(e, ev.ProcessInfo) and _elided(e.cmdline):
                        e.cmdline = procfs.read_cmdline(e.pid) or e.cmdline
                        if e.cmdline and not _elided(e.cmdline):
                            e.comm = procfs.read_comm(e.pid) or e.comm
                    emit(e)
        except Exception as exc:  # noqa: BLE001 - a reader crash must not hang stop()
            self.errors.append(f"strace reader failed: {type(exc).__name__}: {exc}")
        finally:
            out.close()
            proc = self._proc
            if proc is not None:
                try:
                    proc.wait(timeout=self._stop_timeout + 5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    self._reap(proc)
                self._kill_leftovers(proc)
                if not self._stopping and proc.returncode not in (0, None):
                    self.errors.append(f"strace exited with status {proc.returncode}")
            if self._err_reader is not None:    # its attach errors come before the end
                self._err_reader.join(timeout=2)
            for e in self._unseen_in_flight(conv):
                emit(e)
            for key, s in sorted(self._d_stop.items()):
                if key in self._d_start:      # asleep at both ends: the samples say how long
                    emit(s)
            for e in conv.finish(time.time()):
                emit(e)
            self._stopping = True
            self._stopped.set()

    def _read_errors(self, err: Optional[IO[bytes]]) -> None:
        if err is None:
            return
        for raw in err:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            # "strace: ..." or "/usr/bin/strace: attach: ptrace(PTRACE_SEIZE, 12): ..."
            head, sep, tail = line.partition("strace: ")
            msg = tail if sep and " " not in head else line
            if msg.startswith("Process ") and (msg.endswith(" attached") or
                                               msg.endswith(" detached")):
                continue
            attach = parse_attach_error(msg)
            emit = self._emit
            if attach is not None and emit is not None:
                # Saved in the trace: the thread was never observed (analysis/threads/observed.py).
                tid, why, denied = attach
                pid = self._pid_of(tid) or tid
                self._attach_failed.update((tid, pid))
                emit(ev.ObserveError(ts=time.time(), source="strace", what="attach", why=why,
                                     pid=pid, tid=tid, denied=denied))
                continue
            self.errors.append(msg)
        err.close()


def _wait_exit(proc: subprocess.Popen, timeout: float) -> None:
    """``proc.wait(timeout)`` woken the moment it exits (a pidfd), where Popen.wait sleeps in
    steps of up to 50 ms between looks: strace's detach of 2,000 tracees ended up to that much
    before the recording noticed."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):        # before Linux 5.3, or already reaped
        proc.wait(timeout=timeout)
        return
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    proc.wait(timeout=0.05)
