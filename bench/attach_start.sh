#!/bin/sh
# Attach start on this host (bench/attach_start.py's docstring): this checkout's .venv, the
# eBPF and /proc backends, 7 repetitions; arguments are passed on (--backends, --reps, --tree).
cd "$(dirname "$0")/.." && exec .venv/bin/python bench/attach_start.py "$@"
