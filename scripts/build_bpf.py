"""Build hangtrace's CO-RE BPF objects: every bpf/NAME.bpf.c into NAME.bpf.o, once, for any
kernel with BTF (libbpf relocates the struct offsets at load).

    python scripts/build_bpf.py [--out DIR]        # default: beside the sources, bpf/
    python scripts/build_bpf.py --regenerate-vmlinux   # refresh bpf/vmlinux/<arch>/vmlinux.h

Contract:
- ``build(out_dir) -> [paths of the objects built]``: clang -target bpf -g -O2 against
  bpf/vmlinux/<arch>/vmlinux.h (committed: generated from BTF with ``bpftool btf dump file
  /sys/kernel/btf/vmlinux format c``, so every build of a commit compiles the same types) and
  libbpf's headers (<bpf/bpf_helpers.h>: libbpf-dev). DWARF is stripped (llvm-strip -g,
  where installed); the BTF and CO-RE relocations stay. Source paths are mapped to "bpf/"
  (the objects do not depend on where the checkout is).
- Raises RuntimeError with the reason (one line: what is missing and what to install) when
  a tool is missing or a compile fails; the CLI prints it and exits 1.
- For an architecture without a committed vmlinux.h, one is generated from the running
  kernel's BTF into ``out_dir`` (bpftool needed), else RuntimeError.
scripts/setup.sh runs it; the package build calls ``build()`` and ships the objects as
package data (tracer/record/backends/ebpf/source.py:object_path finds them).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BPF_DIR = os.path.join(ROOT, "bpf")
BTF = "/sys/kernel/btf/vmlinux"
MIN_CLANG = 12          # __builtin_preserve_enum_value (helper feature probes)
# uname -m -> (the arch name bpf_tracing.h wants, the vmlinux.h directory)
ARCHES = {"x86_64": ("x86", "x86_64"), "aarch64": ("arm64", "aarch64"),
          "arm64": ("arm64", "aarch64")}


def _tool(names: List[str], why: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError(f"{names[0]} not found: {why}")


def _clang() -> str:
    found = [f"clang-{v}" for v in range(20, MIN_CLANG - 1, -1)]
    clang = _tool(["clang"] + found, "apt install clang (BPF CO-RE objects need clang "
                  f">= {MIN_CLANG})")
    out = subprocess.run([clang, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"clang version (\d+)", out)
    if m and int(m.group(1)) < MIN_CLANG:
        raise RuntimeError(f"{clang} is clang {m.group(1)}: >= {MIN_CLANG} is needed")
    return clang


def _libbpf_include() -> str:
    cands = [os.environ.get("LIBBPF_INCLUDE", "")]
    if shutil.which("pkg-config"):
        r = subprocess.run(["pkg-config", "--variable=includedir", "libbpf"],
                           capture_output=True, text=True)
        cands.append(r.stdout.strip())
    cands += ["/usr/include", "/usr/local/include"]
    for inc in cands:
        if inc and os.path.exists(os.path.join(inc, "bpf", "bpf_helpers.h")):
            return inc
    raise RuntimeError("libbpf headers (bpf/bpf_helpers.h) not found: apt install libbpf-dev "
                       "(or set LIBBPF_INCLUDE)")


def _arch() -> tuple:
    machine = os.uname().machine
    if machine not in ARCHES:
        raise RuntimeError(f"no BPF register layout for {machine} (x86_64, aarch64)")
    return ARCHES[machine]


def dump_vmlinux(dest: str) -> str:
    """vmlinux.h from the running kernel's BTF into ``dest`` (a directory)."""
    bpftool = _tool(["bpftool", "/usr/sbin/bpftool"], "apt install bpftool")
    if not os.path.exists(BTF):
        raise RuntimeError(f"no kernel BTF at {BTF}: cannot generate vmlinux.h")
    os.makedirs(dest, exist_ok=True)
    r = subprocess.run([bpftool, "btf", "dump", "file", BTF, "format", "c"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"bpftool btf dump failed: {r.stderr.strip()[:200]}")
    path = os.path.join(dest, "vmlinux.h")
    with open(path, "w") as f:
        f.write(r.stdout)
    return path


def _vmlinux_dir(out_dir: str) -> str:
    committed = os.path.join(BPF_DIR, "vmlinux", _arch()[1])
    if os.path.exists(os.path.join(committed, "vmlinux.h")):
        return committed
    return os.path.dirname(dump_vmlinux(os.path.join(out_dir, "vmlinux-" + _arch()[1])))


def sources() -> List[str]:
    return sorted(os.path.join(BPF_DIR, n) for n in os.listdir(BPF_DIR) if n.endswith(".bpf.c"))


def build(out_dir: str) -> List[str]:
    """Compile every bpf/*.bpf.c into ``out_dir`` (module doc)."""
    clang, inc = _clang(), _libbpf_include()
    target, _ = _arch()
    os.makedirs(out_dir, exist_ok=True)
    vmlinux = _vmlinux_dir(out_dir)
    strip = shutil.which("llvm-strip") or next(
        (p for p in (shutil.which(f"llvm-strip-{v}") for v in range(20, 11, -1)) if p), None)
    built = []
    for src in sources():
        obj = os.path.join(out_dir, os.path.basename(src)[:-2] + ".o")
        cmd = [clang, "-target", "bpf", "-mcpu=v3", "-g", "-O2", f"-D__TARGET_ARCH_{target}",
               "-Wall", "-Wno-unused-function", f"-fdebug-prefix-map={BPF_DIR}=bpf",
               "-I", BPF_DIR, "-I", vmlinux, "-I", inc, "-c", src, "-o", obj + ".tmp"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr[:200])
            raise RuntimeError(f"clang failed on {os.path.basename(src)}: {first.strip()}")
        if strip:
            subprocess.run([strip, "-g", obj + ".tmp"], check=True)
        os.replace(obj + ".tmp", obj)
        built.append(obj)
    return built


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=BPF_DIR, help="where the .bpf.o files go (default bpf/)")
    ap.add_argument("--regenerate-vmlinux", action="store_true",
                    help="rewrite bpf/vmlinux/<arch>/vmlinux.h from this kernel's BTF")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.regenerate_vmlinux:
            print(dump_vmlinux(os.path.join(BPF_DIR, "vmlinux", _arch()[1])))
            return 0
        for path in build(a.out):
            if not a.quiet:
                print(f"{path} ({os.path.getsize(path):,} bytes)")
    except RuntimeError as exc:
        print(f"build_bpf: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
