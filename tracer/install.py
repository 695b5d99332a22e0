"""How this copy of hangtrace was installed, and the advice that fits it (doctor's fixes, the
eBPF backend's errors): a checkout's user has scripts/, a wheel's user pip only.

Contract:
- ``install_kind()`` -> one of ``KINDS``: "checkout" (the package runs from a source tree that has
  setup.py and scripts/build_bpf.py: in place, PYTHONPATH, or an editable install), "wheel" (a
  wheel built elsewhere: pip's direct_url.json names a .whl, or the dist-info's WHEEL tag is a
  registry's, manylinux or py3-none-any), "sdist" (built on this machine from a source archive:
  direct_url.json names a .tar.gz/.zip, or the WHEEL tag is a plain ``linux_*`` one), or
  "unknown". Read from files only, cached; never raises.
- ``core_objects_fix()``, ``bcc_fix()``: what to do when the CO-RE objects, or BCC and the
  kernel headers, are missing; each names only what that kind has (scripts/: a checkout's).
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Optional

__all__ = ["KINDS", "install_kind", "kind_from", "core_objects_fix", "bcc_fix"]

KINDS = ("checkout", "wheel", "sdist", "unknown")
PACKAGE_DIR = Path(__file__).resolve().parent
DIST = "hangtrace"
_BCC_APT = "apt install bpfcc-tools python3-bpfcc linux-headers-$(uname -r)"


def kind_from(package_dir: Path, direct_url: Optional[str], wheel_tag: Optional[str]) -> str:
    """The install kind (module doc) from the package's folder, the text of direct_url.json (None
    when pip wrote none: installed from an index) and the dist-info's WHEEL ``Tag`` (None when
    there is no dist-info)."""
    top = package_dir.parent
    if (top / "setup.py").exists() and (top / "scripts" / "build_bpf.py").exists():
        return "checkout"
    if direct_url:
        try:
            info = json.loads(direct_url)
        except ValueError:
            info = {}
        url = str(info.get("url", ""))
        if info.get("dir_info", {}).get("editable"):
            return "checkout"
        if url.endswith(".whl"):
            return "wheel"
        if url.endswith((".tar.gz", ".zip", ".tar.bz2", ".tgz")) or "dir_info" in info:
            return "sdist"
    if wheel_tag:
        platform = wheel_tag.rsplit("-", 1)[-1]
        return "sdist" if platform.startswith("linux_") else "wheel"
    return "unknown"


@functools.lru_cache(maxsize=1)
def install_kind() -> str:
    """This copy's kind (module doc)."""
    direct_url = tag = None
    try:
        from importlib import metadata
        dist = metadata.distribution(DIST)
        if Path(str(dist.locate_file("tracer"))).resolve() == PACKAGE_DIR:
            direct_url = dist.read_text("direct_url.json")
            for line in (dist.read_text("WHEEL") or "").splitlines():
                if line.startswith("Tag:"):
                    tag = line.split(":", 1)[1].strip()
    except Exception:           # no metadata (a checkout run in place), or unreadable
        pass
    return kind_from(PACKAGE_DIR, direct_url, tag)


def core_objects_fix(kind: Optional[str] = None) -> str:
    """What makes the CO-RE objects for this kind of install (module doc)."""
    kind = kind or install_kind()
    machine = os.uname().machine
    if kind == "checkout":
        return "python scripts/build_bpf.py (needs clang and libbpf-dev)"
    if kind == "sdist":
        return ("apt install clang libbpf-dev, then pip install --force-reinstall the sdist "
                "(its build makes the objects); or the pure wheel (py3-none-any), which carries "
                f"them for {machine} where it was built there")
    return ("pip install the pure wheel (hangtrace-*-py3-none-any.whl, built on "
            f"{machine}: it carries the objects), or the sdist with clang and libbpf-dev "
            "installed (its build makes them)")


def bcc_fix(kind: Optional[str] = None) -> str:
    """What makes BCC and the kernel headers available for this kind of install (module doc)."""
    kind = kind or install_kind()
    if kind == "checkout":
        return "scripts/setup-ebpf.sh"
    return f"{_BCC_APT}, with hangtrace in a venv made with --system-site-packages"
