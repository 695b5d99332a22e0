"""The CPython interpreters (3.10 or later, with their headers) that the wheel scripts build with
and check on: one per minor version, oldest first, printed one a line.

Usage: python scripts/find_pythons.py        (scripts/build_wheels.sh and check_dist.py use it)

Where they come from, in this order:
- ``HANGTRACE_PYTHONS``: the interpreters to use (paths, or names on PATH), separated by spaces;
  nothing else is looked for. (``PYTHONS``, build_wheels.sh's older name, is read too.)
- Else: ``/usr/bin/python3.1N`` and ``/usr/local/bin/python3.1N`` (the system's: Debian's 3.11
  is the one BCC's ``python3-bpfcc`` is for), then pyenv's
  ``$PYENV_ROOT/versions/3.1N.*/bin/python3.1N`` (``PYENV_ROOT`` default ``~/.pyenv``; the
  development VM and CI have 3.10, 3.11, 3.12 and 3.13 there), then ``python3.1N`` on PATH;
  for each minor version the first found that runs and has ``Python.h`` (a free-threaded
  build, ``Py_GIL_DISABLED``, is skipped: abi3 does not cover it).
An interpreter left out is said on stderr with the reason (no headers, does not run).
CI needs nothing more: the pyenv versions are on the image. (npm's portable-python-3.X packages
hold no Python: their postinstall downloads it from GitHub, which these machines cannot reach.)
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

MINORS = range(10, 20)
PROBE = ("import os, sys, sysconfig; "
         "inc = os.path.join(sysconfig.get_paths()['include'], 'Python.h'); "
         "print('%d.%d' % sys.version_info[:2], sys.implementation.name, "
         "os.path.exists(inc), bool(sysconfig.get_config_var('Py_GIL_DISABLED')))")


def candidates() -> List[str]:
    """Every interpreter to try, in the order of preference (module doc)."""
    listed = os.environ.get("HANGTRACE_PYTHONS") or os.environ.get("PYTHONS")
    if listed:
        return [shutil.which(p) or p for p in listed.split()]
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found: List[str] = []
    for minor in MINORS:
        name = f"python3.{minor}"
        found += [f"/usr/bin/{name}", f"/usr/local/bin/{name}"]
        found += sorted(glob.glob(os.path.join(root, "versions", f"3.{minor}.*", "bin", name)),
                        reverse=True)
        on_path = shutil.which(name)
        if on_path and f"{os.sep}shims{os.sep}" not in on_path:    # (pyenv's: seen above)
            found.append(on_path)
    return [p for p in found if os.path.isfile(p) and os.access(p, os.X_OK)]


def probe(py: str) -> Tuple[Optional[str], str]:
    """(its "3.N", or None with why it is left out)."""
    try:
        out = subprocess.run([py, "-c", PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"does not run ({exc})"
    if out.returncode != 0:
        return None, f"does not run (exit {out.returncode})"
    version, impl, headers, free_threaded = out.stdout.split()
    if impl != "cpython" or tuple(map(int, version.split("."))) < (3, 10):
        return None, f"{impl} {version}: not CPython 3.10+"
    if headers != "True":
        return None, f"{version}: no Python.h (Debian: apt install python{version}-dev)"
    if free_threaded == "True":
        return None, f"{version}: free-threaded (abi3 does not cover it)"
    return version, ""


def pythons() -> List[str]:
    """One interpreter per minor version, oldest first (module doc)."""
    chosen: Dict[str, str] = {}
    for py in candidates():
        version, why = probe(py)
        if version is None:
            print(f"find_pythons: {py} left out: {why}", file=sys.stderr)
        elif version not in chosen:
            chosen[version] = py
    return [chosen[v] for v in sorted(chosen, key=lambda v: int(v.split(".")[1]))]


if __name__ == "__main__":
    found = pythons()
    if not found:
        print("find_pythons: no CPython 3.10+ with headers found (HANGTRACE_PYTHONS names "
              "them)", file=sys.stderr)
        sys.exit(1)
    print("\n".join(found))
