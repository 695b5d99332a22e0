"""The package's build (setup.py) and where an installed copy finds its data (tracer/resources.py):
the compiled helpers' extension from a glob of the csrc folders with fastpath's hash, the eBPF
CO-RE hook (skipped without scripts/build_bpf.py or clang, a RuntimeError one warning), the
data folders found in the checkout; the metadata (license files, classifiers, extras) as the
README says. The installed wheel and sdist themselves: tests/live/test_dist.py."""
from __future__ import annotations

import importlib.util
import os
import sys
import tomllib
from pathlib import Path

import pytest

from tracer import resources
from tracer.strace import fastpath

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def setup_py():
    spec = importlib.util.spec_from_file_location("_hangtrace_setup_test", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)         # setup() runs only as __main__
    return mod


def test_the_extension_is_every_csrc_file_with_fastpaths_hash(setup_py):
    ext = setup_py.fast_extension()
    files = fastpath.source_files(str(ROOT / "tracer"))
    assert files and all("/csrc/" in f for f in files)
    rel = sorted(os.path.relpath(f, ROOT) for f in files)
    assert sorted(ext.sources + ext.depends) == rel
    assert ext.optional is True and ext.name == "tracer.strace._fast"
    assert dict(ext.define_macros)["SOURCE_HASH"] == f'"{fastpath.source_hash(str(ROOT / "tracer"))}"'
    assert all(d.endswith("csrc") for d in ext.include_dirs)


def test_the_module_built_here_is_the_one_hangtrace_uses():
    mod = fastpath.compiled()
    if mod is None:
        pytest.skip(fastpath.status())
    assert mod.SOURCE_HASH == fastpath.source_hash(str(ROOT / "tracer"))


def _build_py(setup_py, tmp_path, monkeypatch, script_text=None, clang=True):
    from setuptools import Distribution
    script = tmp_path / "build_bpf.py"
    if script_text is not None:
        script.write_text(script_text)
    monkeypatch.setattr(setup_py, "BUILD_BPF", str(script))
    monkeypatch.setattr(setup_py.shutil, "which",
                        lambda name: "/usr/bin/clang" if clang else None)
    cmd = setup_py.BuildPy(Distribution({"name": "hangtrace"}))
    cmd.build_lib = str(tmp_path / "lib")
    return cmd


FAKE = """
import os
def build(out_dir):
    path = os.path.join(out_dir, "hangtrace.bpf.o")
    open(path, "wb").write(b"\\x7fELF")
    return [path]
"""


def test_the_core_objects_land_next_to_the_bpf_c(setup_py, tmp_path, monkeypatch):
    cmd = _build_py(setup_py, tmp_path, monkeypatch, FAKE)
    built = cmd.build_bpf_objects()
    assert built == [str(tmp_path / "lib" / "tracer" / "bpf" / "hangtrace.bpf.o")]
    assert Path(built[0]).read_bytes() == b"\x7fELF"


def test_no_script_no_clang_or_a_failure_is_not_an_error(setup_py, tmp_path, monkeypatch,
                                                         capsys):
    assert _build_py(setup_py, tmp_path, monkeypatch, None).build_bpf_objects() == []
    assert _build_py(setup_py, tmp_path, monkeypatch, FAKE, clang=False).build_bpf_objects() == []
    failing = "def build(out_dir):\n    raise RuntimeError('no bpftool')\n"
    assert _build_py(setup_py, tmp_path, monkeypatch, failing).build_bpf_objects() == []
    assert "eBPF CO-RE objects not built: no bpftool (BCC compiles" in capsys.readouterr().err


def test_data_folders_are_found_in_the_checkout():
    bpf, scen = resources.bpf_dir(), resources.scenario_dir()
    assert (bpf / "hangtrace.bpf.c").exists() and (bpf / "cuda_calls.bpf.c").exists()
    assert (scen / "sglang_like.py").exists() and (scen / "build.py").exists()
    assert resources.is_checkout(bpf) and resources.is_checkout(scen)
    assert not resources.is_checkout(resources.PACKAGE_DIR / "scenarios")
    from tracer.record.backends.ebpf import layout, source
    assert layout.HEADER.parent == bpf and source.source_path("cuda_calls").parent == bpf
    assert source.object_path("hangtrace").parent == bpf


def test_a_checkout_without_the_editable_install_finds_them_too(tmp_path):
    import subprocess
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in "
            "repr(f).lower() and 'Editable' not in getattr(f, '__name__', '')]\n"
            "from tracer import resources\nprint(resources.bpf_dir()); print(resources.scenario_dir())")
    p = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                       cwd=str(ROOT), env={"PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(ROOT / "bpf"), str(ROOT / "fixtures" / "scenarios")]


def test_demo_lists_its_scenarios_and_refuses_an_unknown_one():
    from tracer.record import demo
    names = demo.scenario_names()
    assert "sglang_like" in names and "lock_order_deadlock" in names
    assert "build" not in names and "_scenario_util" not in names
    with pytest.raises(demo.DemoError, match="bundled: "):
        demo.scenario_argv("no_such_scenario")


def test_the_metadata():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "hangtrace" and meta["license"].startswith("Apache-2.0")
    for f in meta["license-files"]:
        assert (ROOT / f).exists()
    assert any(c.startswith("Operating System :: POSIX :: Linux") for c in meta["classifiers"])
    assert {"Homepage", "Source", "Issues"} <= set(meta["urls"])
    deps = " ".join(meta["dependencies"])
    assert "psutil" in deps and "pyelftools" in deps and "click" in deps and "rich" in deps
    extras = meta["optional-dependencies"]
    assert any("py-spy" in x for x in extras["stacks"])
    assert "nvidia-ml-py" in deps and "gpu" not in extras   # issue 34: a plain dependency
    assert any(x.startswith("perfetto") for x in extras["perfetto"])
    assert meta["scripts"]["hangtrace"] == "tracer.cli:entry"


def test_the_readme_lists_the_dependencies_pyproject_has():
    """README's "Dependencies" bullet names every dependency and extra of pyproject.toml."""
    import re
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    readme = (ROOT / "README.md").read_text()
    bullet = readme.split("- Dependencies", 1)[1].split("\n- ", 1)[0]
    for dep in meta["dependencies"]:
        name = re.split(r"[<>=!~\[ ]", dep, 1)[0]
        assert name in bullet, name
    for extra in meta["optional-dependencies"]:
        assert f"`{extra}`" in bullet, extra


def test_the_pure_wheel_switch(monkeypatch):
    """HANGTRACE_PURE=1 builds no extension (the py3-none-any wheel); unset or 0, the helpers."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_hangtrace_setup", ROOT / "setup.py")
    setup_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_py)
    for value, pure in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv(setup_py.PURE_VAR, value)
        assert setup_py.pure() is pure, value
    monkeypatch.delenv(setup_py.PURE_VAR)
    assert not setup_py.pure()
    assert setup_py.fast_extension().name == "tracer.strace._fast"


def test_the_abi3_switch(setup_py, monkeypatch):
    """HANGTRACE_ABI3=1 builds the helpers against CPython 3.10's limited API (one
    _fast.abi3.so, the cp310-abi3 wheel); unset or 0, against the building Python's full API."""
    for value, abi3 in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv(setup_py.ABI3_VAR, value)
        ext = setup_py.fast_extension()
        assert setup_py.abi3() is abi3 and ext.py_limited_api is abi3, value
        assert dict(ext.define_macros).get("Py_LIMITED_API") == ("0x030A0000" if abi3 else None)
    assert setup_py.ABI3_TAG == "cp310"


@pytest.mark.slow
def test_the_limited_api_build_gives_what_the_full_one_does(tmp_path):
    """scripts/build_fast.py with HANGTRACE_ABI3=1 compiles every csrc file against 3.10's
    limited API (-Werror=implicit-function-declaration: a call the limited API lacks is an
    error, not a warning) into _fast.abi3.so, which splits strace lines and writes rows as the
    pure-Python twins do; its RowBuffer gives its rows as bytes (no buffer protocol there)."""
    import subprocess
    env = dict(os.environ, HANGTRACE_ABI3="1",
               CFLAGS="-Werror=implicit-function-declaration")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_fast.py"), "--out",
                        str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    built = list(out.rglob("_fast*.so"))
    assert [b.name for b in built] == ["_fast.abi3.so"]
    check = """
import importlib.machinery, importlib.util, sys
from tracer.strace.lines import py_split_line
from tracer.events import scrub_args as py_scrub_args
spec = importlib.util.spec_from_file_location("tracer.strace._fast", sys.argv[1])
fast = importlib.util.module_from_spec(spec); spec.loader.exec_module(fast)
lines = ['123 1795953170.000001 read(3</dev/nvidia0>, "ab\\\\n", 4096) = 3 <0.000010>',
         '7 1795953170.5 futex(0x7f, FUTEX_WAIT_PRIVATE, 0, NULL <unfinished ...>',
         '7 1795953171.25 <... futex resumed>) = -1 EAGAIN (Resource temporarily unavailable)',
         'not strace', '9 1.0 ioctl(4, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), 0x7ffc) = 0',
         '5 1.0 write(1, "caf\\u00e9", 5) = 5']
for line in lines:
    assert fast.split_line(line) in (py_split_line(line), fast.UNHANDLED), line
    got = fast.scrub(line)
    assert got == py_scrub_args(line) or got is fast.UNHANDLED, line
buf = fast.RowBuffer(); buf.add(b"ab"); buf.add(bytearray(b"c"))
assert buf.tobytes() == b"abc" and len(buf) == 3 and not hasattr(buf, "__buffer__")
print("ok")
"""
    p = subprocess.run([sys.executable, "-c", check, str(built[0])], cwd=ROOT,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.stdout.strip() == "ok", p.stdout + p.stderr
