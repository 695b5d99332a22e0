"""The layout's rules (docs/ARCHITECTURE.md), checked on the source: what each package may import,
no import cycles between modules, no module over 450 lines. Imports under ``if TYPE_CHECKING``
do not run and do not count for the layering, but they do for cycles: a circle of types is
a circle all the same (issue 31)."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "tracer"
MAX_LINES = 450

# package -> the packages it may import (besides itself). "__init__" is tracer/__init__.py.
# errors.py and outputs.py (every file hangtrace writes) may be imported by every layer.
EVERY_LAYER = {"errors", "outputs"}
ALLOWED: Dict[str, Set[str]] = {
    "events": set(),
    "report": set(),
    "errors": set(),
    "outputs": {"errors"},
    "resources": set(),
    "install": set(),
    "snapshot_model": {"events"},
    "linux": {"events", "errors"},
    "gpu": {"events", "errors", "linux"},
    "tracefile": {"events", "errors", "linux", "gpu"},
    "strace": {"events", "errors", "linux", "gpu", "tracefile"},
    "analysis": {"events", "errors", "report", "linux", "gpu", "tracefile"},
    "load": {"events", "errors", "report", "linux", "gpu", "tracefile", "strace", "analysis"},
    "render": {"events", "errors", "report", "snapshot_model", "analysis", "load", "tracefile",
               "linux", "gpu"},
    "record": {"events", "errors", "report", "snapshot_model", "linux", "gpu", "tracefile",
               "strace", "analysis", "load", "render", "resources", "install"},
    "cli": {"events", "errors", "report", "snapshot_model", "linux", "gpu", "tracefile",
            "strace", "analysis", "load", "render", "record", "resources", "install"},
    "__main__": {"cli"},
    "__init__": set(),
}

# The stages inside analysis/, numbered once (analysis/__init__.py; ARCHITECTURE.md mirrors
# them): a stage imports only the stages before it. The modules at analysis/'s top (the
# analyzer, the pipeline, merge, watch's rules) may import every stage; no stage imports them.
from tracer.analysis import STAGES  # noqa: E402


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _package_of(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _stage_of(mod: str) -> str:
    """The analysis stage of a module ("" for analysis's top modules and other packages)."""
    parts = mod.split(".")
    if len(parts) > 3 and parts[1] == "analysis" and parts[2] in STAGES or (
            len(parts) == 3 and parts[1] == "analysis" and parts[2] in STAGES):
        return parts[2]
    return ""


def _imports(path: Path, typing_too: bool = False) -> List[str]:
    """Absolute names of the tracer modules a file imports at run time (and, with
    ``typing_too``, under ``if TYPE_CHECKING`` as well)."""
    mod = _module_name(path)
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text())
    skip: Set[int] = set()
    for node in ast.walk(tree):
        if not typing_too and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            base_parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
            if node.level:
                base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if not base.startswith("tracer"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append(sub if _exists(sub) else base)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("tracer")]
    return out


def _exists(mod: str) -> bool:
    p = ROOT.joinpath(*mod.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _all_modules() -> Dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def test_packages_import_only_what_the_layout_allows():
    bad = []
    for mod, path in _all_modules().items():
        pkg = _package_of(mod)
        allowed = ALLOWED.get(pkg)
        assert allowed is not None, f"{mod}: package {pkg!r} is not in the layout (ARCHITECTURE.md)"
        for dep in _imports(path):
            dpkg = _package_of(dep)
            if dpkg != pkg and dpkg not in allowed and dep != "tracer" and not (
                    dpkg in EVERY_LAYER and pkg not in EVERY_LAYER):
                bad.append(f"{mod} imports {dep}")
    assert not bad, "\n".join(bad)


def test_analysis_stages_import_only_the_stages_before_them():
    """A stage never imports a later stage, nor analysis's top, not even for a type."""
    bad = []
    for mod, path in _all_modules().items():
        stage = _stage_of(mod)
        if _package_of(mod) != "analysis" or not stage:
            continue
        for dep in _imports(path, typing_too=True):
            if _package_of(dep) != "analysis" or dep == "tracer.analysis":
                continue
            dstage = _stage_of(dep)
            if not dstage or STAGES.index(dstage) > STAGES.index(stage):
                bad.append(f"{mod} ({stage}) imports {dep} ({dstage or 'top'})")
    assert not bad, "\n".join(bad)


def test_stages_are_numbered_once():
    """Each stage folder's docstring opens with its number in analysis/__init__.py, and
    ARCHITECTURE.md's table lists the same folders under the same numbers."""
    import re
    folders = {p.name for p in (PKG / "analysis").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(STAGES)
    for n, stage in enumerate(STAGES):
        doc = ast.get_docstring(ast.parse((PKG / "analysis" / stage / "__init__.py").read_text()))
        assert doc and doc.startswith(f"Stage {n}"), f"{stage}/__init__.py: {doc!r:.40}"
    arch = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    rows = re.findall(r"^\| `(\w+)/` \| (\d+) \|.*\| ([^|]*) \|$", arch, re.M)
    assert [r[:2] for r in rows] == [(s, str(n)) for n, s in enumerate(STAGES)], rows
    for stage, _, may in rows:       # the table's "may import": earlier stages, and no more
        allowed = set() if may.startswith("nothing") else set(may.split(", "))
        assert allowed <= set(STAGES[:STAGES.index(stage)]), (stage, may)
        used = {_stage_of(d) for p in (PKG / "analysis" / stage).glob("*.py")
                for d in _imports(p, typing_too=True) if _package_of(d) == "analysis"}
        assert used - {stage, ""} <= allowed, (stage, sorted(used - {stage, ""} - allowed))


def test_every_analysis_module_is_in_a_stage_or_at_the_top():
    top = {"tracer.analysis", "tracer.analysis.analyzer", "tracer.analysis.report_build",
           "tracer.analysis.watch_rules"}
    stray = [m for m in _all_modules() if _package_of(m) == "analysis" and not _stage_of(m)
             and m not in top]
    assert not stray, f"analysis modules outside the stage folders: {stray}"


def test_no_import_cycles():
    mods = _all_modules()
    graph = {m: {d for d in _imports(p, typing_too=True) if d in mods and d != m}
             for m, p in mods.items()}
    state: Dict[str, int] = {}
    cycles: List[List[str]] = []

    def visit(m: str, stack: List[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d] if d in stack else [m, d])
            elif d not in state:
                visit(d, stack + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    # a package's __init__ importing its own submodules is not a cycle of logic
    real = [c for c in cycles if not any(x.count(".") < 2 and x != "tracer" and
                                         all(y.startswith(x) for y in c) for x in c)]
    assert not real, "import cycles: " + "; ".join(" -> ".join(c) for c in real)


def test_no_module_over_450_lines():
    long = {str(p.relative_to(ROOT)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_every_output_file_is_created_by_outputs_py():
    """One place creates files (tracer/outputs.py: O_EXCL|O_NOFOLLOW, 0600, renamed into
    place): no other module opens a file for writing or makes a temporary one."""
    import re
    writes = re.compile(r"""(?<!fd)open\([^)]*["'][wax]b?\+?["']|O_CREAT|O_TRUNC|mkstemp|"""
                        r"""NamedTemporaryFile|mode=["'][wax]b?["']|\.write_(?:text|bytes)\(""")
    bad = []
    for path in PKG.rglob("*.py"):
        if path.name == "outputs.py" and path.parent == PKG:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if writes.search(line) and "GzipFile(fileobj=" not in line \
                    and "open(os.devnull" not in line:      # /dev/null: nothing is created
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, "\n".join(bad)


# Readers of the live system: render/ draws a Report or a trace and never looks at /proc
# (the progress bar gets its progress from the readers' callbacks).
LIVE_READERS = {"tracer.linux.procfs", "tracer.linux.procfs_fds", "tracer.linux.processes",
                "tracer.linux.access", "tracer.linux.sockdiag", "tracer.linux.tcpdiag"}


def test_renderers_never_read_proc():
    bad = []
    for mod, path in _all_modules().items():
        if _package_of(mod) != "render":
            continue
        bad += [f"{mod} imports {dep}" for dep in _imports(path) if dep in LIVE_READERS]
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
                      and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    id(node) not in docstrings and node.value.startswith("/proc"):
                bad.append(f"{mod}:{node.lineno} names {node.value!r}")
    assert not bad, "\n".join(bad)
