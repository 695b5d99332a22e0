"""What a module's contract names exists (issue 31 item 6): every file of this repository a
docstring under tracer/ names (``something.py``, ``bpf/x.bpf.c``, ``csrc/y.c``) is a file of
the checkout, and every dotted ``tracer.x.y`` name is a module or a module's attribute.
Names of other projects' files (kernel headers, NVML's, PyTorch's) are listed apart."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "tracer"
# files of other projects that docstrings cite as sources
EXTERNAL = {"asm-generic/unistd.h", "asm/unistd_64.h", "include/uapi/linux/netlink.h",
            "sock_diag.h", "unix_diag.h", "include/uapi/linux/futex.h",
            "include/uapi/linux/inet_diag.h", "tcp.h", "fs/locks.c",
            "nptl/pthreadtypes-arch.h", "torch/cuda/graphs.py", "torch/version.py",
            "vllm/_version.py", "nv_escape.h", "nv-ioctl-numbers.h",
            "uvm_ioctl.h/uvm_linux_ioctl.h", "nvml.h", "linux/btf.h",
            # a traced program's own files, as examples of frames and paths
            "x.py", "/a/b/x.py", "train.py", "queue.py", "threading.py", "serve.py"}
# packages made only when the distribution is built (setup.py's package-dir)
BUILT = {"tracer.scenarios", "tracer.bpf"}
PLACEHOLDERS = {"bpf/NAME.bpf.c", ".bpf.h"}
FILE_REF = re.compile(r"[\w/.-]*\w\.(?:py|c|h)\b")
DOTTED = re.compile(r"\btracer(?:\.\w+)+")


def _docstrings():
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    yield path, doc


def _files():
    skip = {".git", ".venv", "build", "node_modules"}
    return [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.parts)]


def test_every_file_a_docstring_names_exists():
    files = [str(p.relative_to(ROOT)) for p in _files()]
    names = {Path(f).name for f in files}
    missing = []
    for path, doc in _docstrings():
        for ref in FILE_REF.findall(doc):
            if ref in EXTERNAL or ref in PLACEHOLDERS:
                continue
            ok = any(f.endswith(ref) for f in files) if "/" in ref else ref in names
            if not ok:
                missing.append(f"{path.relative_to(ROOT)}: {ref}")
    assert not missing, "\n".join(sorted(set(missing)))


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_dotted_tracer_name_resolves():
    missing = [f"{path.relative_to(ROOT)}: {ref}" for path, doc in _docstrings()
               for ref in DOTTED.findall(doc)
               if ref not in BUILT and not _resolves(ref.rstrip("."))]
    assert not missing, "\n".join(sorted(set(missing)))
