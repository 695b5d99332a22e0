"""Rebuild hangtrace's optional compiled helpers in the source tree (or into DIR).

Usage: python scripts/build_fast.py [--out DIR] [--quiet]

The install builds them (``pip install .`` or ``-e .``: setup.py's optional extension). This
script builds the same extension (setup.py's ``fast_extension()``: the same sources, flags and
source hash) with setuptools' build_ext, for after an edit of the C: into
tracer/strace/ (in place) or into DIR/tracer/strace/. The module carries the hash of the
sources it was built from; hangtrace ignores a module built from another version
(tracer/strace/fastpath.py). Exit status 0 when built, 1 when it could not be: hangtrace
then runs its pure-Python path, which gives the same results, only slower. With
HANGTRACE_ABI3=1 it builds the abi3 wheel's module (_fast.abi3.so: CPython 3.10's limited API,
setup.py), e.g. into a copy of the tree to time it with bench/import_speed.py --baseline.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setup_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("_hangtrace_setup", os.path.join(ROOT, "setup.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)        # setup() runs only under __main__
    return mod


def build(out_dir: str = "", quiet: bool = False) -> str:
    """Build; returns the path of the module. Raises RuntimeError with the reason."""
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise RuntimeError(f"no Python.h in {include} (Debian/Ubuntu: apt-get install "
                           "python3-dev)")
    from setuptools import Distribution
    ext = _setup_module().fast_extension()
    ext.optional = False                 # here a failure is the answer asked for
    dist = Distribution({"name": "hangtrace", "ext_modules": [ext]})
    cmd = dist.get_command_obj("build_ext")
    cmd.inplace = not out_dir            # type: ignore[attr-defined]
    if out_dir:
        cmd.build_lib = out_dir          # type: ignore[attr-defined]
    cmd.build_temp = os.path.join(out_dir or os.path.join(ROOT, "build"), "temp-fast")  # type: ignore[attr-defined]
    cmd.force = True                     # type: ignore[attr-defined]
    cwd = os.getcwd()
    log = io.StringIO()
    try:
        os.chdir(ROOT)                   # the extension's sources are relative to the tree
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            cmd.ensure_finalized()
            cmd.run()
    except Exception as exc:  # CompileError, LinkError, a missing compiler: one reason
        raise RuntimeError(f"{type(exc).__name__}: {exc}\n{log.getvalue()[-2000:]}") from None
    finally:
        os.chdir(cwd)
    if not quiet and "warning" in log.getvalue():
        print(log.getvalue().strip(), file=sys.stderr)
    return os.path.abspath(os.path.join(ROOT, cmd.get_ext_fullpath(ext.name)) if not out_dir
                           else cmd.get_ext_fullpath(ext.name))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="", help="directory for the module")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    try:
        path = build(os.path.abspath(a.out) if a.out else "", a.quiet)
    except (RuntimeError, OSError) as e:
        print(f"build_fast: not built: {e}", file=sys.stderr)
        return 1
    if not a.quiet:
        print(f"build_fast: built {os.path.relpath(path, ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
