#!/bin/bash
# Attach start on the GPU host as an install has it: hangtrace's dependencies in a venv of its
# own (the system's Python, the carried wheels .whl/*.whl and .whl/venv/*.whl unpacked into its
# site-packages), beside the image's torch venv (whose .pth files Python reads at every start).
# Then one `python -X importtime` of attach -b ebpf in the clean venv: where the start goes.
#   [CLEAN_ONLY=1] [TREES='--tree A --tree B'] bash bench/attach_start_venv.sh [REPS]     (on the device; the archive is $OUT/attach-start.txt)
set -u
cd "$(dirname "$0")/.." || exit 1
. fixtures/gpu/device_env.sh
setup_ebpf python3
REPS=${1:-7}
TXT=$OUTDIR/attach-start.txt
SYS=/usr/bin/python3
V=$WORK/venv
"$SYS" -m venv --without-pip "$V" 2>/dev/null || { SYS=$(python3 -c "import sys; print(sys._base_executable)"); "$SYS" -m venv --without-pip "$V"; } || exit 1
SITE=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for whl in .whl/*.whl .whl/venv/*.whl; do
  case "$whl" in *py_spy*) continue ;; esac
  "$V/bin/python" -m zipfile -e "$whl" "$SITE"
done
{
  echo "# $(date -u +%FT%TZ) $(nvidia-smi -L 2>/dev/null | head -1)"
  echo "# torch venv: $(command -v python3) ($(python3 -V 2>&1)); clean venv: $SYS ($("$SYS" -V 2>&1))"
  for py in "$V/bin/python" python3; do
    echo "## $py: python -c pass, 7 runs (s):"
    for i in 1 2 3 4 5 6 7; do
      env -u PYTHONPATH "$py" -c 'import time,subprocess,sys; t=time.monotonic(); subprocess.run([sys.executable,"-c","pass"]); print(round(time.monotonic()-t,3))'
    done | tr '\n' ' '; echo
  done
  echo "## clean venv (PYTHONPATH only the tree):"
  env -u PYTHONPATH "${HT_ENV[@]}" PYTHONPATH= "$V/bin/python" bench/attach_start.py --backends ebpf proc --reps "$REPS" ${TREES:-} 2>&1
  [ -n "${CLEAN_ONLY:-}" ] || {
  echo "## torch venv (device_env.sh's PYTHONPATH):"
  "${HT_ENV[@]}" python3 bench/attach_start.py --backends ebpf proc --reps "$REPS" 2>&1; }
  for b in ebpf proc ebpf proc; do
    echo "## bench/attach_phases.py --backend $b in the clean venv (s from the script's start):"
    env -u PYTHONPATH "${HT_ENV[@]}" PYTHONPATH= "$V/bin/python" bench/attach_phases.py --backend $b 2>&1 | grep -v '^hangtrace:'
  done
  echo "## -X importtime of one attach -b ebpf in the clean venv (imports over 5 ms, cumulative us):"
  sleep 60 & T=$!
  env -u PYTHONPATH "${HT_ENV[@]}" PYTHONPATH=. "$V/bin/python" -X importtime -m tracer attach -p $T -d 1 -b ebpf \
    -o "$WORK/one.htrace.gz" 2>"$WORK/imp.txt" >/dev/null
  kill $T
  awk -F'|' '/import time:/ && $2+0 > 5000 {print}' "$WORK/imp.txt" | tail -40
} > "$TXT" 2>&1
cat "$TXT"
