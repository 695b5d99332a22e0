"""The package's bytecode is on disk after scripts/setup.sh: where PYTHONDONTWRITEBYTECODE is
set (many containers, the development VM, CI) Python reads .pyc files but never writes them,
and every hangtrace command compiled its modules again (0.3-0.4 s of CPU of a 2 s attach's
0.9-1.1 s). Checked in a fresh interpreter that imports what ``attach`` imports: each module of
the package read from source has its .pyc, fresh or older than a later edit of its source."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r'''
import importlib.util, json, os, sys
import tracer.cli.commands, tracer.cli.live_cmds, tracer.record.session
import tracer.analysis.analyzer, tracer.render.console
out = {}
for name, m in list(sys.modules.items()):
    f = getattr(m, "__file__", None) or ""
    if not name.startswith("tracer") or not f.endswith(".py"):
        continue
    pyc = importlib.util.cache_from_source(f)
    try:
        head = open(pyc, "rb").read(16)
    except OSError:
        out[name] = "no .pyc"
        continue
    st = os.stat(f)
    flags = int.from_bytes(head[4:8], "little")      # non-zero: hash-based, Python checks it
    fresh = flags != 0 or int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF \
        and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF
    if not fresh and os.stat(pyc).st_mtime >= st.st_mtime:
        out[name] = "stale, and not from an edit since"
print(json.dumps(out))
'''


def test_the_package_s_bytecode_is_on_disk() -> None:
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    missing = json.loads(p.stdout)
    assert missing == {}, f"{len(missing)} modules compiled at each start: {sorted(missing)[:8]}"
