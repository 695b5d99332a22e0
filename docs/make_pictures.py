"""Make the README pictures from a real run (run as root from the repository root):

    .venv/bin/python docs/make_pictures.py

1. starts the bundled SGLang-like scenario, runs ``hangtrace attach`` on it inside tmux (a real
   terminal, 150x45), captures the pane with its colours mid-recording (the live view) and
   after the end (the report);
2. turns each capture into SVG with rich (``Text.from_ansi`` + ``Console.export_svg``) and
   into PNG with headless Chromium;
3. exports the recorded trace with ``hangtrace export --format perfetto`` and draws it with
   docs/timeline.html, a small self-contained renderer of Chrome trace event JSON written for
   this picture (it is not Perfetto: the Perfetto UI cannot be fetched here), screenshotted
   with headless Chromium.
Writes docs/live-view.png, docs/report.png, docs/timeline.png (the SVGs are intermediate).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.text import Text

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PY = str(ROOT / ".venv" / "bin" / "python")
SESSION = "hangtrace-pictures"


def sh(*args: str, **kw) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def to_png(ansi: str, name: str, title: str, width: int = 150) -> None:
    console = Console(record=True, width=width, file=open(os.devnull, "w"), force_terminal=True,
                      color_system="truecolor")
    console.print(Text.from_ansi(ansi.rstrip("\n")))
    svg = console.export_svg(title=title)
    (DOCS / f"{name}.svg").write_text(svg)
    w, h = (float(x) for x in re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups())
    screenshot(DOCS / f"{name}.svg", DOCS / f"{name}.png", int(w) + 1, int(h) + 1)
    (DOCS / f"{name}.svg").unlink()


def screenshot(src: Path, png: Path, w: int, h: int) -> None:
    sh("chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
       f"--screenshot={png}", f"--window-size={w},{h}", f"file://{src}")


def main() -> None:
    sc = subprocess.Popen([PY, "sglang_like.py"], cwd=ROOT / "fixtures" / "scenarios",
                          stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pid = int(sc.stdout.readline().split()[1])
        time.sleep(0.5)
        trace = Path(tempfile.gettempdir()) / "hangtrace-pictures.htrace.gz"
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
        sh("tmux", "new-session", "-d", "-s", SESSION, "-x", "150", "-y", "45",
           f"cd {ROOT} && {PY} -m tracer attach {pid} --duration 8 -o {trace}; sleep 600")
        time.sleep(7.0)
        live = sh("tmux", "capture-pane", "-e", "-p", "-t", SESSION)
        time.sleep(6.0)
        full = sh("tmux", "capture-pane", "-e", "-p", "-S", "-200", "-t", SESSION)
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
    finally:
        os.killpg(sc.pid, 9)
        sc.wait()
    live = "\n".join(ln for ln in live.splitlines() if ln.strip()) + "\n"
    to_png(live, "live-view", "hangtrace attach: live view (SGLang-like tree, mid-recording)")
    at = full.find("hangtrace: attaching")
    to_png(full[at:], "report", "hangtrace attach: final report")
    doc = DOCS / "timeline-trace.json"
    sh(PY, "-m", "tracer", "export", str(trace), "--format", "perfetto", "-o", str(doc), cwd=ROOT)
    data = json.loads(doc.read_text())
    page = (DOCS / "timeline.html").read_text().replace("/*TRACE*/null", json.dumps(data))
    with tempfile.NamedTemporaryFile("w", suffix=".html", delete=False) as f:
        f.write(page)
    screenshot(Path(f.name), DOCS / "timeline.png", 1400, 350)
    os.unlink(f.name)
    doc.unlink()
    print("wrote", *(DOCS / n for n in ("live-view.png", "report.png", "timeline.png")))


if __name__ == "__main__":
    sys.exit(main())
