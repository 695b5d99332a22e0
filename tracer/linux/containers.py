"""Selecting processes by cgroup or by container: ``--cgroup PATH`` and ``--container ID``.

Contract:
- ``select_by_cgroup(path)``: (pids in cgroup ``path`` or below it, what was left out: as
  processes.keep_selectable); ``select_by_container(prefix)``: (pids of the one container
  whose id starts so, that ``Container`` or None, what was left out); ``select_targets`` both,
  ``TargetGone`` when one selects nothing. Bad values, an ambiguous prefix: ``UsageError``,
  one line; a path with no directory where cgroup v2 is mounted: ``TargetGone``.
- They compare the paths /proc/PID/cgroup gives (``cgroup_places``, never the caller), so they
  work inside a cgroup namespace (a sidecar's paths start at its own root) and on cgroup v1.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from ..errors import TargetGone, UsageError, shown
from .cgroup import (CGROUP_MOUNT, MIN_PREFIX, CgroupPlace, Container, cgroup2_mount_of,
                     cgroup_arg, cgroup_dir, container_prefix, in_cgroup, read_cgroup)
from .processes import keep_selectable
from .procfs import list_pids

__all__ = ["cgroup_places", "select_by_cgroup", "select_by_container", "select_targets"]


def cgroup_places(root: str = "/proc") -> Dict[int, CgroupPlace]:
    """pid -> where /proc/PID/cgroup puts it (module doc)."""
    me = os.getpid() if os.path.realpath(root) == "/proc" else -1
    out: Dict[int, CgroupPlace] = {}
    for pid in list_pids(root):
        if pid == me:
            continue
        place = read_cgroup(pid, root)
        if place is not None:
            out[pid] = place
    return out


def _is_cgroup2(mount: str) -> bool:
    return os.path.isfile(os.path.join(mount, "cgroup.controllers"))


def cgroup2_mount() -> str:
    """Where cgroup v2 is mounted here (/proc/self/mounts), else CGROUP_MOUNT."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            return cgroup2_mount_of(f.read()) or CGROUP_MOUNT
    except OSError:
        return CGROUP_MOUNT


def select_by_cgroup(text: str, *, force: bool = False, root: str = "/proc",
                     mount: Optional[str] = None) -> Tuple[List[int], List[str]]:
    """The processes of cgroup ``text`` and its descendants (module doc); ``mount``: where
    cgroup v2 is (default: as /proc/self/mounts says)."""
    mount = mount or cgroup2_mount()
    path = cgroup_arg(text, mount)
    if path is None:
        raise UsageError(f"--cgroup {shown(text)}: not a cgroup path (a path relative to the "
                         f"cgroup root, as /proc/PID/cgroup shows it, or one under {mount})")
    if path == "/" and not force:
        raise UsageError("--cgroup /: the root cgroup holds every process on the machine; "
                         "give --force to record it anyway")
    if _is_cgroup2(mount) and not os.path.isdir(cgroup_dir(path, mount)):
        raise TargetGone(f"--cgroup {shown(text)}: no cgroup {shown(path)} under {mount}")
    pids = sorted(pid for pid, place in cgroup_places(root).items()
                  if in_cgroup(place.path, path))
    return keep_selectable(pids, force=force, root=root)


def select_by_container(text: str, *, force: bool = False, root: str = "/proc"
                        ) -> Tuple[List[int], Optional[Container], List[str]]:
    """The processes of the one container whose id starts with ``text`` (module doc)."""
    prefix = container_prefix(text)
    if prefix is None:
        raise UsageError(f"--container {shown(text)}: not a container id (at least "
                         f"{MIN_PREFIX} hex digits of it, as docker ps, crictl ps or "
                         "kubectl's containerID show it)")
    members: Dict[str, List[int]] = {}
    which: Dict[str, Container] = {}
    for pid, place in sorted(cgroup_places(root).items()):
        c = place.container
        if c is not None and c.id.startswith(prefix):
            members.setdefault(c.id, []).append(pid)
            which[c.id] = c
    if len(which) > 1:
        names = ", ".join(f"{c.short} ({c.runtime or 'kubernetes'})"
                          for c in sorted(which.values(), key=lambda c: c.id))
        raise UsageError(f"--container {shown(text)} is ambiguous: it starts the ids of "
                         f"{len(which)} containers ({names}); give more digits")
    if not which:
        return [], None, []
    cid = next(iter(which))
    found, left_out = keep_selectable(members[cid], force=force, root=root)
    return found, which[cid], left_out


def select_targets(cgroup: Optional[str], container: Optional[str], *,
                   force: bool = False) -> List[int]:
    """The pids ``--cgroup`` and ``--container`` select (record/session.resolve_targets);
    TargetGone, with what was left out, when one of them selects nothing."""
    out: List[int] = []
    if cgroup:
        found, left_out = select_by_cgroup(cgroup, force=force)
        if not found:
            raise TargetGone(f"no process in cgroup {shown(cgroup)}" + _left(left_out))
        out.extend(found)
    if container:
        found, _, left_out = select_by_container(container, force=force)
        if not found:
            raise TargetGone("no process in a container whose id starts with "
                             f"{shown(container)}" + _left(left_out))
        out.extend(p for p in found if p not in out)
    return out


def _left(left_out: List[str]) -> str:
    return f" (left out: {'; '.join(left_out)})" if left_out else ""
