"""The build steps pyproject.toml cannot say (the metadata is all in pyproject.toml).

Contract:
- ``fast_extension()``: the optional C extension ``tracer.strace._fast`` (the compiled
  helpers of the strace importer and the trace reader), built from every ``tracer/**/csrc/*.c``
  (a glob: the sources may live in several packages' csrc folders) with
  ``-DSOURCE_HASH`` set to strace/fastpath.py's hash of those sources, so that a module
  built from other sources is ignored at run time. ``optional=True``: without a compiler or
  Python's headers the build goes on and hangtrace runs its pure-Python twins.
  scripts/build_fast.py builds the same extension into the source tree.
- ``PURE_VAR`` (``HANGTRACE_PURE=1``): no extension at all, so the wheel is the pure
  ``py3-none-any`` one (any CPython >= 3.10, any architecture: the pure-Python path). Its eBPF
  CO-RE objects go under ``tracer/bpf/<machine>/`` (``uname -m``: the objects read syscall
  registers by the architecture's pt_regs, ``-D__TARGET_ARCH_x86``, so they are per
  architecture, not per Python or kernel): source.py:object_path takes them on that machine
  only; on another architecture the eBPF backend compiles the C with BCC at attach. Without
  it the wheel is ``cp3X-cp3X-linux_*`` (``cp310-abi3-linux_*`` with ``ABI3_VAR``), which
  ``auditwheel repair`` turns into the manylinux wheel a registry accepts
  (scripts/build_wheels.sh does both, scripts/check_dist.py checks them).
- ``ABI3_VAR`` (``HANGTRACE_ABI3=1``): the helpers built against CPython 3.10's limited API
  (``Py_LIMITED_API=0x030A0000``, ``py_limited_api``): one ``_fast.abi3.so`` and a
  ``cp310-abi3`` wheel that CPython 3.10, 3.11, 3.12, 3.13 and later install
  (scripts/build_wheels.sh builds it). tracer/csrc/capi.h says what differs from the full
  API; bench/results/import-speed-abi3-vm.txt has its speed against the full-API build on
  3.11 (import, trace reading and analysis within 4%). Unset, as an sdist's install is,
  they are built against the full API of the Python that builds them.
- ``BuildPy``: after the ordinary build_py, the ``__init__.py`` of ``tracer.scenarios``
  (``SCENARIOS_INIT``: the source folder has none, so that py-spy and tracebacks name a scenario
  by its file, not as a module of a package), then the eBPF CO-RE objects: when scripts/build_bpf.py
  exists and clang is installed, its ``build(out_dir) -> [paths of .bpf.o]`` writes them next
  to the .bpf.c in the package (``tracer/bpf``; the source bpf/ folder for an editable
  install). A RuntimeError (no clang, bpftool or libbpf headers) is one warning line: the
  eBPF backend then compiles with BCC at run time, as without the objects.
- ``data_files``: the man page (docs/hangtrace.1, generated from the click definitions by
  ``python -m tracer.cli.manpage``) into share/man/man1.
- ``MAPPED``: the layout stays as the product has it (tracer/, bpf/, fixtures/ at the top):
  bpf/ and fixtures/scenarios/ become the packages ``tracer.bpf`` and ``tracer.scenarios``
  (package-dir; their files are listed in pyproject's package-data).
"""
from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import sys
from types import ModuleType
from typing import List

from setuptools import Extension, find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
FAST_MODULE = "tracer.strace._fast"
PURE_VAR = "HANGTRACE_PURE"
ABI3_VAR = "HANGTRACE_ABI3"
LIMITED_API = "0x030A0000"                 # CPython 3.10's limited API: the cp310-abi3 tag
ABI3_TAG = "cp310"
# Data folders at the top of the tree, mapped into the package (tracer/resources.py).
MAPPED = {"tracer.bpf": "bpf", "tracer.scenarios": "fixtures/scenarios"}
FAST_CFLAGS = ["-O2", "-fvisibility=hidden", "-Wall"]
BUILD_BPF = os.path.join(HERE, "scripts", "build_bpf.py")     # the eBPF helper's, when there
SCENARIOS_INIT = ('"""The scenario programs of ``hangtrace demo`` (fixtures/scenarios/ of the '
                  'source tree), as package data: each one is run as a program, never imported."""\n')


def abi3() -> bool:
    """Whether the helpers are built against the limited API (module doc)."""
    return os.environ.get(ABI3_VAR, "") not in ("", "0")


def pure() -> bool:
    """Whether this build is the pure wheel's (module doc)."""
    return os.environ.get(PURE_VAR, "") not in ("", "0")


def _load(name: str, path: str) -> ModuleType:
    """A module of this tree loaded by path (the build environment has none of the runtime
    dependencies, so tracer itself is not imported)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, path))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fast_extension() -> Extension:
    """The compiled helpers as an optional extension (module doc)."""
    fastpath = _load("_hangtrace_fastpath", "tracer/strace/fastpath.py")
    package = os.path.join(HERE, "tracer")
    files: List[str] = [os.path.relpath(p, HERE) for p in fastpath.source_files(package)]
    return Extension(
        FAST_MODULE,
        sources=[p for p in files if p.endswith(".c")],
        depends=[p for p in files if p.endswith(".h")],
        include_dirs=sorted({os.path.dirname(p) for p in files}),
        define_macros=[("SOURCE_HASH", f'"{fastpath.source_hash(package)}"')]
        + ([("Py_LIMITED_API", LIMITED_API)] if abi3() else []),
        extra_compile_args=FAST_CFLAGS,
        py_limited_api=abi3(),
        optional=True)


class BuildPy(build_py):
    """build_py, then the eBPF CO-RE objects when they can be built (module doc)."""

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            init = os.path.join(self.build_lib, "tracer", "scenarios", "__init__.py")
            with open(init, "w") as f:
                f.write(SCENARIOS_INIT)
        if pure() and not getattr(self, "editable_mode", False):
            for obj in glob.glob(os.path.join(self.build_lib, "tracer", "bpf", "*.bpf.o")):
                os.remove(obj)           # a checkout's objects, copied as package data
            self.build_bpf_objects(os.uname().machine)
            return
        self.build_bpf_objects()

    def build_bpf_objects(self, arch_dir: str = "") -> List[str]:
        script = BUILD_BPF
        if not os.path.exists(script):
            return []
        if shutil.which("clang") is None:
            self.announce("hangtrace: eBPF CO-RE objects not built: no clang (BCC compiles "
                          "the programs at run time)", level=3)
            return []
        out = os.path.join(HERE, "bpf") if getattr(self, "editable_mode", False) else \
            os.path.join(self.build_lib, "tracer", "bpf", arch_dir)
        os.makedirs(out, exist_ok=True)
        try:
            built = _load("_hangtrace_build_bpf", script).build(out)
        except RuntimeError as exc:
            print(f"hangtrace: eBPF CO-RE objects not built: {exc} (BCC compiles the programs "
                  "at run time)", file=sys.stderr)
            return []
        return list(built)


if __name__ == "__main__":
    setup(packages=find_packages(include=["tracer", "tracer.*"]) + sorted(MAPPED),
          package_dir=dict(MAPPED),
          ext_modules=[] if pure() else [fast_extension()],
          cmdclass={"build_py": BuildPy},
          options={"bdist_wheel": {"py_limited_api": ABI3_TAG}} if abi3() and not pure() else {},
          data_files=[("share/man/man1", ["docs/hangtrace.1"])])
