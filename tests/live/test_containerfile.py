"""deploy/Containerfile's steps, run here as a container build would run them (no container
runtime on the CI machine): the builder stage's COPY lines make a source folder of the
checkout's tracked files, its RUN lines build the CO-RE objects and the wheel, the runtime
stage's lines install that wheel alone into a fresh venv; then the installed package holds
the CO-RE objects and ``hangtrace doctor --json``, run from outside the checkout, says libbpf
loads them (BCC is not in the venv). The image's absolute paths (/src, /build, /dist,
/tmp/dist, /opt/hangtrace) are mapped into a temporary folder; ``apt-get`` lines are checked,
not run: each package they install must be installed here. It takes minutes and the package
index: it runs in CI (CI=true) or with HANGTRACE_TEST_DIST=1, as tests/live/test_dist.py."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"   # debian's
# the image's own folders, longest first; any other absolute path a RUN line names is refused
MAPPED = ("/opt/hangtrace", "/tmp/dist", "/build", "/dist", "/src")
_MAP_RE = re.compile(r"(?<![\w./-])(" + "|".join(re.escape(m) for m in MAPPED) + r")(?=[/\s'\")]|$)")
_ABS_RE = re.compile(r"(?<![\w.$-])/[^\s'\"):]*")

Instr = Tuple[str, str]


def instructions(text: str) -> List[List[Instr]]:
    """The stages of a Containerfile, each a list of (INSTRUCTION, arguments), continuation
    lines joined and comments dropped."""
    stages: List[List[Instr]] = []
    logical, buf = [], ""
    for line in text.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        logical.append(buf + line)
        buf = ""
    for line in logical:
        op, _, args = line.strip().partition(" ")
        if op.upper() == "FROM":
            stages.append([])
        stages[-1].append((op.upper(), args.strip()))
    return stages


def _mapped(text: str, tmp: Path) -> str:
    out = _MAP_RE.sub(lambda m: str(tmp) + m.group(1), text)
    stray = [p for p in _ABS_RE.findall(text)
             if not any(p == m or p.startswith(m + "/") for m in MAPPED)]
    assert not stray, f"a RUN line names a path outside the mapped folders: {stray} in {text}"
    return out


def _apt_packages(cmd: str) -> List[str]:
    words = shlex.split(cmd.split("install", 1)[1].split("&&")[0])
    return [w for w in words if not w.startswith("-")]


def _installed(pkg: str) -> bool:
    p = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True,
                       text=True)
    return p.returncode == 0 and p.stdout.endswith("installed")


def _tracked(src: str) -> List[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--", src], cwd=ROOT, capture_output=True,
                         check=True).stdout.decode().split("\0")
    return [f for f in out if f]


def _copy(args: str, tmp: Path, workdir: Path) -> None:
    """COPY SRC... DEST of the build context (the checkout's tracked files)."""
    *srcs, dest = shlex.split(args)
    for src in srcs:
        files = _tracked(src)
        assert files, f"COPY {src}: no tracked file there"
        base = Path(_mapped(dest, tmp)) if dest.startswith("/") else workdir / dest
        for f in files:
            rel = Path(f).relative_to(src) if f != src else Path(Path(f).name)
            target = base / rel if (dest.endswith("/") or len(files) > 1 or f != src) \
                else base
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, target)


def run_stage(stage: List[Instr], tmp: Path, env: Dict[str, str]) -> None:
    workdir = tmp
    for op, args in stage[1:]:
        if op == "WORKDIR":
            workdir = Path(_mapped(args, tmp))
            workdir.mkdir(parents=True, exist_ok=True)
        elif op == "COPY" and args.startswith("--from="):
            src, dest = shlex.split(args)[1:]
            shutil.copytree(_mapped(src, tmp), _mapped(dest, tmp))
        elif op == "COPY":
            _copy(args, tmp, workdir)
        elif op == "ENV":
            key, _, value = args.partition("=")
            env[key] = os.path.expandvars(_mapped(value, tmp).replace("$PATH", env["PATH"]))
        elif op == "RUN" and "apt-get" in args:
            missing = [p for p in _apt_packages(args) if not _installed(p)]
            if missing:
                pytest.skip(f"the image's packages {missing} are not installed here")
        elif op == "RUN":
            p = subprocess.run(["bash", "-ec", _mapped(args, tmp)], cwd=workdir, env=env,
                               capture_output=True, text=True, timeout=1800)
            assert p.returncode == 0, f"RUN {args}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
        elif op not in ("ENTRYPOINT", "CMD", "LABEL", "ARG"):
            raise AssertionError(f"{op}: an instruction this test does not run")


@pytest.mark.slow
def test_the_containerfile_builds_a_wheel_with_its_core_objects(tmp_path):
    if not (os.environ.get("CI") or os.environ.get("HANGTRACE_TEST_DIST")):
        pytest.skip("builds the wheel and installs it (minutes, the package index): CI=true "
                    "or HANGTRACE_TEST_DIST=1 runs it")
    stages = instructions(CONTAINERFILE.read_text())
    assert [s[0][1].split()[-1] for s in stages] == ["builder", "debian:12-slim"]
    env = {"PATH": IMAGE_PATH, "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONSTRAINT"):
        if key in os.environ:
            env[key] = os.environ[key]
    for stage in stages:
        run_stage(stage, tmp_path, env)
    entry = json.loads(stages[-1][-1][1])
    assert entry == ["/opt/hangtrace/bin/hangtrace"]
    hangtrace = _mapped(entry[0], tmp_path)
    py = str(Path(hangtrace).with_name("python"))
    where = subprocess.run([py, "-c", "import tracer, os; print(os.path.dirname(tracer.__file__))"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    pkg = Path(where.stdout.strip())
    assert str(pkg).startswith(str(tmp_path / "opt" / "hangtrace")), pkg    # not the checkout
    for obj in ("hangtrace", "cuda_calls"):
        assert (pkg / "bpf" / f"{obj}.bpf.o").stat().st_size > 0
    p = subprocess.run([hangtrace, "doctor", "--json"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert str(pkg / "bpf") in doc["libbpf"]["detail"], doc["libbpf"]
    assert not doc["bcc"]["ok"]                     # no BCC in the image: the CO-RE path
    if os.geteuid() == 0 and doc["bpf_syscall"]["ok"] and doc["btf"]["ok"]:
        assert doc["ebpf_loader"]["ok"] and "libbpf" in doc["ebpf_loader"]["detail"], doc
    assert doc["compiled_helpers"]["ok"], doc["compiled_helpers"]
    version = subprocess.run([hangtrace, "--version"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, check=True)
    assert version.stdout.startswith("hangtrace, version ")
