#!/usr/bin/env bash
# Run a command beside N busy processes (default 4: load 4 on the 2-core CI machine), the way
# the test suite must pass on a busy machine:
#     bash scripts/under_load.sh 4 .venv/bin/python -m pytest -q tests/live/test_scenario_states.py
# Each busy process is a shell loop that never sleeps; all are killed (by pid) when the command
# ends, whatever its status, which is the script's status.
set -uo pipefail
n=${1:?usage: under_load.sh N COMMAND...}
shift
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait "${pids[@]}" 2>/dev/null; }
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$n"); do
    sh -c 'while :; do :; done' &
    pids+=("$!")
done
"$@"
