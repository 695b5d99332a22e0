"""Where tracefs is (the kernel's trace event directory), and mounting it where it is not.

Contract:
- ``find_tracefs()`` returns the first of /sys/kernel/tracing, /sys/kernel/debug/tracing that
  holds trace events (an ``events/sched`` directory), or None.
- ``mounted_tracefs()``: the first of those where /proc/self/mounts shows a tracefs, readable
  or not (doctor tells "not mounted" from "mounted, root's only").
- ``ensure_tracefs(may_mount)`` returns ``(path, "")`` when tracefs is usable, mounting it
  at /sys/kernel/tracing first if it is missing and ``may_mount`` (root, or CAP_SYS_ADMIN),
  else ``(None, why)`` with one line saying why and what to run.
Kernel facts: tracefs has been its own filesystem since 4.1 ("mount -t tracefs nodev
/sys/kernel/tracing"); mounting debugfs also makes it appear at /sys/kernel/debug/tracing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Optional, Sequence, Tuple

__all__ = ["TRACEFS_DIRS", "find_tracefs", "mounted_tracefs", "ensure_tracefs", "mount"]

TRACEFS_DIRS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


def find_tracefs(dirs: Sequence[str] = TRACEFS_DIRS) -> Optional[str]:
    """The first of ``dirs`` that holds trace events (an ``events/sched`` directory), or None. A
    directory alone proves nothing: a fresh sysfs (``ip netns exec`` mounts one; so do many
    containers) has an empty /sys/kernel/tracing mount point."""
    for d in dirs:
        if os.path.isdir(os.path.join(d, "events", "sched")):
            return d
    return None


def mounted_tracefs(dirs: Sequence[str] = TRACEFS_DIRS, mounts: str = "/proc/self/mounts"
                    ) -> Optional[str]:
    """The first of ``dirs`` where /proc/self/mounts (readable by every user) has a tracefs,
    whether or not this user may look inside it (tracefs is 0700 root), else None."""
    try:
        with open(mounts) as f:
            points = {fields[1] for fields in (line.split() for line in f)
                      if len(fields) > 2 and fields[2] == "tracefs"}
    except OSError:
        return None
    return next((d for d in dirs if d in points), None)


def mount(source: str, target: str, fstype: str) -> Optional[str]:
    """mount(2); None on success, else the error text."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.mount(source.encode(), target.encode(), fstype.encode(), 0, None) == 0:
        return None
    return os.strerror(ctypes.get_errno())


def ensure_tracefs(may_mount: bool, dirs: Sequence[str] = TRACEFS_DIRS) -> Tuple[Optional[str], str]:
    """``(path, "")`` when tracefs is usable, mounting it first if it is missing and ``may_mount``,
    else ``(None, why)`` (module doc). The mount is made in the caller's mount namespace (under
    ``ip netns exec``, only that command's view) and left there, as distributions mount it at
    boot."""
    found = find_tracefs(dirs)
    if found is not None:
        return found, ""
    hint = "mount -t tracefs nodev /sys/kernel/tracing"
    if not may_mount:
        return None, f"tracefs is not mounted (mounting it needs root): {hint}"
    errors = []
    for source, target, fstype in (("nodev", dirs[0], "tracefs"),
                                   ("nodev", os.path.dirname(dirs[-1]), "debugfs")):
        if not os.path.isdir(target):
            errors.append(f"{target} missing")
            continue
        err = mount(source, target, fstype)
        if err is not None:
            errors.append(f"{fstype} on {target}: {err}")
            continue
        found = find_tracefs(dirs)
        if found is not None:
            return found, ""
    return None, f"tracefs is not mounted and could not be mounted ({'; '.join(errors)}): {hint}"
