#!/usr/bin/env bash
# Set up hangtrace on a fresh Debian/Ubuntu machine: system tools the tests and backends use
# (strace, gcc for the C scenarios and the compiled helpers), then a venv with the package and
# its test dependencies, installed through the package's own build (setup.py: an editable
# install compiles the optional C extension of the compiled helpers in place).
# The venv uses the system python3 with --system-site-packages so that Debian's python3-bpfcc
# (the eBPF backend) stays importable. Safe to run again: it only adds what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

missing=()
command -v strace >/dev/null 2>&1 || missing+=(strace)
command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
# clang and libbpf's headers build the CO-RE BPF objects (scripts/build_bpf.py); libbpf1 loads them
command -v clang >/dev/null 2>&1 || missing+=(clang)
[ -e /usr/include/bpf/bpf_helpers.h ] || missing+=(libbpf-dev)
command -v llvm-strip >/dev/null 2>&1 || missing+=(llvm)
"$PY" -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
# Python.h, for the optional compiled helpers (setup.py's extension)
"$PY" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(
    sysconfig.get_paths()["include"], "Python.h")))' || missing+=(python3-dev)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing ${missing[*]}" >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "setup: please install: ${missing[*]} (strace is needed for the strace backend)" >&2
    fi
fi
# The eBPF backend (BCC + kernel headers); skipped with a message when not root or not apt.
# Its tests skip with a reason when it cannot load; HANGTRACE_REQUIRE_EBPF=1 makes that fatal.
if ! bash scripts/setup-ebpf.sh; then
    echo "setup: eBPF backend not set up; hangtrace falls back to strace/proc" >&2
    [ "${HANGTRACE_REQUIRE_EBPF:-0}" != 1 ] || exit 1
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv --system-site-packages .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]' 2>&1 \
    | grep -v "^WARNING: Location" || true
.venv/bin/python -c 'import tracer, click, rich, psutil, elftools, msgspec, pytest, xdist' \
    || { echo "setup: the venv is incomplete" >&2; exit 1; }
# Python's bytecode of the package and the scenarios, written once here: where
# PYTHONDONTWRITEBYTECODE is set (many containers, this VM) Python reads .pyc files but never
# writes them, and each hangtrace command compiled its 180 modules again (0.3-0.4 s of CPU of
# an attach's 0.9-1.1 s). A source edited later is compiled in memory until the next setup.
.venv/bin/python -m compileall -q -j 0 tracer fixtures/scenarios >/dev/null \
    || echo "setup: bytecode not written; each command compiles the package" >&2
# The compiled helpers of the strace importer: the install built them with this
# machine's C compiler where it could; without them hangtrace runs its pure-Python path (same
# results, slower). scripts/build_fast.py rebuilds them after an edit of the C.
.venv/bin/python -c 'from tracer.strace import fastpath; import sys
sys.exit(fastpath.compiled() is None)' \
    || echo "setup: compiled helpers not built; the pure-Python path is used" >&2
# The eBPF backend's CO-RE objects (bpf/*.bpf.o, loaded with libbpf); without them it uses BCC.
.venv/bin/python scripts/build_bpf.py --quiet \
    || echo "setup: BPF objects not built; the eBPF backend needs BCC instead" >&2
echo "setup: ok (.venv/bin/hangtrace)" >&2
