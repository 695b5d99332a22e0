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
