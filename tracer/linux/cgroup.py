"""A process's cgroup, and the container it names: /proc/PID/cgroup read by the shapes that
container runtimes give their cgroups (``_SHAPES`` says whose and where they were seen).

Contract:
- ``parse_proc_cgroup(text)`` -> ``CgroupPlace`` (path, version, ``Container`` or None); pure,
  never raises. ``container_of_path(path)``: the ``Container`` a path names (runtime, 64-hex
  id, Kubernetes pod uid and QoS class), None for a host process or a runtime's monitor.
- ``read_cgroup(pid, root)``: the only reader; None when /proc/PID/cgroup cannot be read.
- ``cgroup_arg(text, mount)``, ``in_cgroup(path, wanted)``, ``container_prefix(text)``: the
  ``--cgroup`` and ``--container`` values as the selection compares them (linux/containers.py);
  None for a value that cannot be one. ``cgroup2_mount_of(mounts)``: where v2 is mounted.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

__all__ = ["Container", "CgroupPlace", "parse_proc_cgroup", "container_of_path", "read_cgroup",
           "cgroup_arg", "in_cgroup", "container_prefix", "cgroup2_mount_of", "cgroup_dir",
           "MIN_PREFIX", "CGROUP_MOUNT"]

CGROUP_MOUNT = "/sys/fs/cgroup"
MIN_PREFIX = 4
_HEX64 = r"([0-9a-f]{64})"

# One path component each; the first that matches decides (order: the monitors first).
# Where each shape comes from (seen in /proc/PID/cgroup of real hosts):
# - systemd cgroup driver, runc/crun's "slice:prefix:name" cgroupsPath made a scope
#   "prefix-name.scope": containerd's CRI "cri-containerd-ID.scope", CRI-O's "crio-ID.scope"
#   (and "crio-conmon-ID.scope" for its monitor), Docker's "docker-ID.scope" under
#   system.slice or a kubepods slice, Podman's "libpod-ID.scope" under machine.slice or a
#   user's user.slice (and "libpod-conmon-ID.scope"); nerdctl's "nerdctl-ID.scope"
#   (containerd without CRI). Real lines: neuvector/neuvector share/system/cgroup_test.go
#   (CentOS docker, BottleRocket cri-containerd, OpenShift crio), falcosecurity/libs
#   userspace/libsinsp/container_engine (cri.cpp's and podman.cpp's layouts).
# - containerd without "SystemdCgroup = true" on a systemd host (v1): the cgroupsPath kept as
#   one component, "kubepods-besteffort-podUID.slice:cri-containerd:ID" (neuvector's
#   TestK8sContainerd_v1_4_4, containerd 1.4.4).
# - cgroupfs driver: Docker's "/docker/ID" (nested: "/docker/ID/docker/ID2", the inner one),
#   Kubernetes' "/kubepods/QOS/podUID/ID" (containerd or Docker: the path does not say which)
#   and CRI-O's ".../podUID/crio-ID", Podman's "/libpod_parent/libpod-ID".
# - Podman's split cgroups and systemd-in-container: "libpod-payload-ID", and processes in a
#   "container" child of the scope.
_SHAPES: Tuple[Tuple[str, Optional[str]], ...] = (
    (r"(?:crio|libpod)-conmon-" + _HEX64 + r"(?:\.scope)?", "monitor"),
    (r"cri-containerd-" + _HEX64 + r"\.scope", "containerd"),
    (r".*:cri-containerd:" + _HEX64, "containerd"),
    (r"nerdctl-" + _HEX64 + r"\.scope", "containerd"),
    (r"crio-" + _HEX64 + r"(?:\.scope)?", "cri-o"),
    (r"docker-" + _HEX64 + r"\.scope", "docker"),
    (r"libpod-(?:payload-)?" + _HEX64 + r"(?:\.scope)?", "podman"),
)
_SHAPE_RES = [(re.compile(p), rt) for p, rt in _SHAPES]
_BARE_ID = re.compile(_HEX64)
# "kubepods-burstable-pod<uid>.slice", "kubepods-pod<uid>.slice" (guaranteed: no QoS slice),
# the cgroupfs driver's "pod<uid>"; a static pod's uid is a 32-hex hash, a plain pod's a
# UUID (its dashes written as underscores in a systemd unit name)
_POD_SLICE = re.compile(r"(?:[a-z0-9_]+-)?kubepods-(?:(burstable|besteffort)-)?"
                        r"pod([0-9a-f_\-]+)\.slice(?::.*)?")
_POD_DIR = re.compile(r"pod([0-9a-f\-]{32,36})")
_QOS_DIRS = {"burstable": "burstable", "besteffort": "besteffort"}


@dataclass(frozen=True)
class Container:
    """A container a process runs in: ``runtime`` (None when the path does not name it),
    ``id`` (64 hex), for a Kubernetes pod its ``pod_uid`` and ``qos``."""
    runtime: Optional[str]
    id: str
    pod_uid: Optional[str] = None
    qos: Optional[str] = None

    @property
    def short(self) -> str:
        """The 12-digit id ``docker ps`` and ``crictl ps`` show."""
        return self.id[:12]


@dataclass(frozen=True)
class CgroupPlace:
    """Where /proc/PID/cgroup puts a process: ``path``, its hierarchy's ``version`` (2, or 1)
    and the ``container`` the path names."""
    path: str
    version: int
    container: Optional[Container] = None


def _pod_of(parts: List[str]) -> Tuple[Optional[str], Optional[str]]:
    """(pod uid, QoS class) from the components above a container, or (None, None)."""
    for i, part in enumerate(parts):
        m = _POD_SLICE.fullmatch(part)
        if m:
            return m.group(2).replace("_", "-"), m.group(1) or "guaranteed"
        m = _POD_DIR.fullmatch(part)
        if m and i > 0 and parts[i - 1] in ("kubepods", *_QOS_DIRS):
            qos = _QOS_DIRS.get(parts[i - 1], "guaranteed")
            return m.group(1), qos
    return None, None


def _match(part: str, parent: Optional[str], parts: List[str], i: int
           ) -> Optional[Tuple[Optional[str], str]]:
    """(runtime, id) when component ``part`` is a container's, else None."""
    for rx, runtime in _SHAPE_RES:
        m = rx.fullmatch(part)
        if m:
            return runtime, m.group(1)
    if _BARE_ID.fullmatch(part) and parent is not None:
        if parent == "docker":
            return "docker", part
        if _POD_DIR.fullmatch(parent) and _pod_of(parts[:i])[0] is not None:
            return None, part          # Kubernetes' cgroupfs driver: the runtime is unnamed
    return None


def container_of_path(path: str) -> Optional[Container]:
    """The container a cgroup path names (module doc), None for one that names none."""
    parts = [p for p in path.strip().split("/") if p and p != ".."]
    found: Optional[Tuple[Optional[str], str, int]] = None
    for i, part in enumerate(parts):
        hit = _match(part.lower(), parts[i - 1].lower() if i else None,
                     [p.lower() for p in parts], i)
        if hit is not None:
            found = (hit[0], hit[1], i)         # the innermost wins (docker in docker)
    if found is None or found[0] == "monitor":
        return None
    runtime, cid, i = found
    pod_uid, qos = _pod_of([p.lower() for p in parts[:i + 1]])
    return Container(runtime, cid, pod_uid, qos)


def parse_proc_cgroup(text: str) -> CgroupPlace:
    """The place /proc/PID/cgroup gives (module doc)."""
    v2: Optional[str] = None
    v1: List[str] = []
    for line in text.splitlines():
        hier, sep1, rest = line.partition(":")
        controllers, sep2, path = rest.partition(":")
        if not (sep1 and sep2) or not path:
            continue
        if hier.strip() == "0" and not controllers:
            v2 = path.strip()
        elif controllers == "name=systemd":     # systemd's own tree: the first to show
            v1.insert(0, path.strip())
        else:
            v1.append(path.strip())
    if v2 is not None:
        found = container_of_path(v2)
        if found is not None or not v1:
            return CgroupPlace(v2, 2, found)
    for path in v1:
        found = container_of_path(path)
        if found is not None:
            return CgroupPlace(path, 1, found)
    if v2 is not None:
        return CgroupPlace(v2, 2)
    return CgroupPlace(v1[0] if v1 else "", 1)


def read_cgroup(pid: int, root: str = "/proc") -> Optional[CgroupPlace]:
    """``parse_proc_cgroup`` of /proc/PID/cgroup; None when it cannot be read."""
    try:
        with open(f"{root}/{pid}/cgroup", "rb") as f:
            data = f.read(1 << 16)
    except OSError:
        return None
    return parse_proc_cgroup(data.decode("utf-8", "replace"))


def cgroup_arg(text: str, mount: str = CGROUP_MOUNT) -> Optional[str]:
    """``--cgroup PATH`` as /proc/PID/cgroup writes it (module doc); None when it cannot be one."""
    t = text.strip()
    if not t or "\0" in t:
        return None
    if t == mount or t.startswith(mount.rstrip("/") + "/"):
        t = t[len(mount.rstrip("/")):]
    parts = [p for p in t.split("/") if p and p != "."]
    if any(p == ".." for p in parts):
        return None
    return "/" + "/".join(parts)


def in_cgroup(path: str, wanted: str) -> bool:
    """Whether cgroup ``path`` is ``wanted`` or one of its descendants."""
    if wanted == "/":
        return path.startswith("/")
    return path == wanted or path.startswith(wanted.rstrip("/") + "/")


_RUNTIME_URL = re.compile(r"[a-z][a-z0-9.+-]*://")


def container_prefix(text: str) -> Optional[str]:
    """A ``--container`` value as a hex prefix (module doc), None when it is not one."""
    t = _RUNTIME_URL.sub("", text.strip().lower(), count=1)
    if len(t) < MIN_PREFIX or len(t) > 64 or not all(c in "0123456789abcdef" for c in t):
        return None
    return t


def cgroup2_mount_of(mounts: str) -> Optional[str]:
    """Where /proc/self/mounts says cgroup v2 is mounted (/sys/fs/cgroup on a unified host,
    /sys/fs/cgroup/unified on a hybrid one), None when it is not."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return fields[1].replace("\\040", " ")
    return None


def cgroup_dir(path: str, mount: str = CGROUP_MOUNT) -> str:
    """The directory of cgroup ``path`` (as /proc writes it) under ``mount``."""
    return os.path.join(mount, path.lstrip("/"))
