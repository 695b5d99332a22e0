"""Build hangtrace's optional compiled helpers (tracer/tracefile/csrc/) for this interpreter.

Usage: python scripts/build_fast.py [--out DIR] [--quiet]

Compiles tracer/tracefile/csrc/*.c with the machine's own C compiler ($CC, else the one Python
was built with, else cc) against this interpreter's headers (Debian: python3-dev) into the
module tracer/tracefile/_fast (or into DIR). The module carries the hash of the sources it was
built from; hangtrace ignores a module built from another version (tracer/tracefile/fastpath.py). Exit status 0 when built, 1 when it could not
be: hangtrace then runs its pure-Python path, which gives the same results, only slower.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "tracer", "tracefile")
CSRC = os.path.join(PACKAGE, "csrc")


def sources() -> list:
    return sorted(os.path.join(CSRC, n) for n in os.listdir(CSRC) if n.endswith((".c", ".h")))


def source_hash() -> str:
    """What fastpath.py compares: the sha1 of the sources, in name order."""
    h = hashlib.sha1()
    for path in sources():
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


def compiler() -> str:
    cc = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "").split(" ")[0] or "cc"
    return cc if shutil.which(cc) else "cc"


def build(out_dir: str = "", quiet: bool = False) -> str:
    """Build; returns the path of the module. Raises RuntimeError with the reason."""
    out_dir = out_dir or PACKAGE
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise RuntimeError(f"no Python.h in {include} (Debian/Ubuntu: apt-get install "
                           "python3-dev)")
    cc = compiler()
    if not shutil.which(cc):
        raise RuntimeError("no C compiler (Debian/Ubuntu: apt-get install gcc)")
    target = os.path.join(out_dir, "_fast" + sysconfig.get_config_var("EXT_SUFFIX"))
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out_dir)
    os.close(fd)
    cmd = [cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", f"-I{include}",
           f'-DSOURCE_HASH="{source_hash()}"', *[p for p in sources() if p.endswith(".c")],
           "-o", tmp]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed:\n{r.stderr.strip()}")
        if r.stderr.strip() and not quiet:
            print(r.stderr.strip(), file=sys.stderr)
        os.replace(tmp, target)        # atomic: a running hangtrace keeps its old mapping
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="", help="directory for the module")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    try:
        path = build(a.out, a.quiet)
    except (RuntimeError, OSError) as e:
        print(f"build_fast: not built: {e}", file=sys.stderr)
        return 1
    if not a.quiet:
        print(f"build_fast: built {os.path.relpath(path, ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
