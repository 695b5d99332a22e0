#!/usr/bin/env bash
# Set up what hangtrace's eBPF backend (BCC) needs on a Debian/Ubuntu machine; idempotent.
#
#  - bpfcc-tools + python3-bpfcc: BCC and its Python bindings (the venv is created with
#    --system-site-packages, so Debian's `bcc` module is importable from it);
#  - bpftool when the distribution has it (tests use it to check that nothing stays loaded);
#  - kernel headers: BCC compiles the BPF C at run time against /lib/modules/$(uname -r)/build.
#    The right package is linux-headers-$(uname -r) (a real GPU server has it). A VM or CI
#    kernel that the distribution does not ship (here: 6.18 on Debian 12) has none: then install
#    Debian's linux-headers-amd64 (6.1) and link build -> linux-headers-*-amd64 and
#    source -> linux-headers-*-common. That is enough for tracepoint-only programs: their
#    argument layouts come from the running kernel's tracefs format files, not the headers.
# Skips with a message (exit 0) when not root or without apt-get.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "setup-ebpf: not root; skipped (run: sudo $0)" >&2; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-ebpf: no apt-get; install BCC (python3 bindings) and kernel headers by hand" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
KREL=$(uname -r)
MOD=/lib/modules/$KREL
updated=0
apt_update() { [ $updated -eq 1 ] || { apt-get update -qq >/dev/null; updated=1; }; }
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
candidate() { apt-cache policy "$1" 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; }

want=()
for p in bpfcc-tools python3-bpfcc; do have_pkg "$p" || want+=("$p"); done
if ! have_pkg bpftool && ! command -v bpftool >/dev/null 2>&1; then
    apt_update
    if candidate bpftool; then want+=(bpftool); fi
fi
if [ ! -e "$MOD/build" ]; then
    apt_update
    if candidate "linux-headers-$KREL"; then
        want+=("linux-headers-$KREL")
    else
        want+=(linux-headers-amd64)
    fi
fi
if [ ${#want[@]} -gt 0 ]; then
    apt_update
    echo "setup-ebpf: installing ${want[*]}" >&2
    apt-get install -y -qq "${want[@]}" >/dev/null
fi

if [ ! -e "$MOD/build" ]; then
    # No headers for this kernel: link the distribution's newest generic ones.
    build=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -1 || true)
    common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -1 || true)
    if [ -z "$build" ] || [ -z "$common" ]; then
        echo "setup-ebpf: no kernel headers found under /usr/src; BCC cannot compile" >&2; exit 1
    fi
    mkdir -p "$MOD"
    ln -sfn "$build" "$MOD/build"
    [ -e "$MOD/source" ] || ln -sfn "$common" "$MOD/source"
    echo "setup-ebpf: linked $MOD/build -> $build (headers of another kernel: tracepoints only)" >&2
fi
# Tracepoint ids and argument formats are read from tracefs; a minimal VM may not mount it.
if [ ! -e /sys/kernel/tracing/events ] && [ ! -e /sys/kernel/debug/tracing/events ]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null \
        || mount -t debugfs nodev /sys/kernel/debug 2>/dev/null || true
    [ -e /sys/kernel/tracing/events ] || [ -e /sys/kernel/debug/tracing/events ] \
        || echo "setup-ebpf: tracefs is not mounted and could not be (mount -t tracefs nodev /sys/kernel/tracing)" >&2
fi
/usr/bin/python3 -c 'import bcc' || { echo "setup-ebpf: python3 cannot import bcc" >&2; exit 1; }
echo "setup-ebpf: ok" >&2
