"""How hangtrace was installed (tracer/install.py) and the fixes that fit it; where the pure
wheel's CO-RE objects go (setup.py) and are found (ebpf/source.py:object_path)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tracer import install
from tracer.record.backends.ebpf import source

WHL = json.dumps({"url": "file:///tmp/d/hangtrace-0.1.0-py3-none-any.whl",
                  "archive_info": {"hash": "sha256=ab"}})
SDIST = json.dumps({"url": "file:///tmp/d/hangtrace-0.1.0.tar.gz", "archive_info": {}})
EDITABLE = json.dumps({"url": "file:///work/hangtrace", "dir_info": {"editable": True}})
LOCAL_DIR = json.dumps({"url": "file:///work/hangtrace", "dir_info": {}})


@pytest.mark.parametrize("direct_url, tag, kind", [
    (WHL, "py3-none-any", "wheel"),
    (SDIST, "cp311-cp311-linux_x86_64", "sdist"),
    (EDITABLE, "cp311-cp311-linux_x86_64", "checkout"),
    (LOCAL_DIR, "cp311-cp311-linux_x86_64", "sdist"),           # pip install . : built here
    (None, "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64", "wheel"),   # an index
    (None, "py3-none-any", "wheel"),
    (None, "cp311-cp311-linux_x86_64", "sdist"),                 # an index's sdist, built here
    (None, None, "unknown"),
    ("{not json", "cp311-cp311-linux_aarch64", "sdist"),
])
def test_the_kind_of_an_installed_copy(tmp_path, direct_url, tag, kind):
    pkg = tmp_path / "site-packages" / "tracer"
    pkg.mkdir(parents=True)
    assert install.kind_from(pkg, direct_url, tag) == kind


def test_a_source_tree_is_a_checkout_whatever_the_metadata(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "build_bpf.py").write_text("")
    (tmp_path / "setup.py").write_text("")
    assert install.kind_from(tmp_path / "tracer", WHL, "py3-none-any") == "checkout"
    assert install.install_kind() == "checkout"          # this test runs from one


@pytest.mark.parametrize("kind", ["wheel", "sdist", "unknown"])
def test_an_installed_copy_is_never_told_to_run_scripts(kind):
    for fix in (install.core_objects_fix(kind), install.bcc_fix(kind)):
        assert "scripts/" not in fix and "pip install" in fix or "apt install" in fix
    assert "pure wheel" in install.core_objects_fix(kind)


def test_a_checkout_is_told_its_scripts():
    assert "scripts/build_bpf.py" in install.core_objects_fix("checkout")
    assert install.bcc_fix("checkout") == "scripts/setup-ebpf.sh"


def test_doctor_and_the_loader_give_the_installed_copys_fix(monkeypatch):
    from tracer.record.backends.ebpf import env
    monkeypatch.setattr(install, "install_kind", lambda: "wheel")
    monkeypatch.setattr(env, "privilege_problem", lambda what="eBPF": None)
    monkeypatch.setattr(source, "BPF_DIR", Path("/nonexistent"))
    monkeypatch.setattr(env, "object_path", source.object_path)
    why = env.core_problem()
    if why is None or "not built" not in why:
        pytest.skip(f"libbpf cannot be probed here: {why}")
    assert "scripts/" not in why and "pure wheel" in why


def test_the_pure_wheels_objects_are_found_in_their_architectures_folder(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(source, "BPF_DIR", tmp_path)
    arch = tmp_path / os.uname().machine
    arch.mkdir()
    (arch / "hangtrace.bpf.o").write_bytes(b"\x7fELF")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "cuda_calls.bpf.o").write_bytes(b"\x7fELF")
    assert source.object_path("hangtrace") == arch / "hangtrace.bpf.o"
    assert source.object_path("cuda_calls") == tmp_path / "cuda_calls.bpf.o"   # not another's
    (tmp_path / "hangtrace.bpf.o").write_bytes(b"\x7fELF")
    assert source.object_path("hangtrace") == tmp_path / "hangtrace.bpf.o"      # flat first


def test_the_pure_build_puts_the_objects_in_the_architectures_folder(tmp_path, monkeypatch):
    import importlib.util
    from setuptools import Distribution
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("_hangtrace_setup_pure", root / "setup.py")
    setup_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_py)
    script = tmp_path / "build_bpf.py"
    script.write_text("import os\ndef build(out_dir):\n    p = os.path.join(out_dir, 'hangtrace.bpf.o')\n"
                      "    open(p, 'wb').write(b'x')\n    return [p]\n")
    monkeypatch.setattr(setup_py, "BUILD_BPF", str(script))
    monkeypatch.setattr(setup_py.shutil, "which", lambda name: "/usr/bin/clang")
    monkeypatch.setenv("HANGTRACE_PURE", "1")
    cmd = setup_py.BuildPy(Distribution({"name": "hangtrace"}))
    cmd.build_lib = str(tmp_path / "lib")
    lib_bpf = tmp_path / "lib" / "tracer" / "bpf"
    lib_bpf.mkdir(parents=True)
    (lib_bpf / "hangtrace.bpf.o").write_bytes(b"a checkout's")
    monkeypatch.setattr(setup_py.build_py, "run", lambda self: None)
    (tmp_path / "lib" / "tracer" / "scenarios").mkdir(parents=True)
    cmd.run()
    assert not (lib_bpf / "hangtrace.bpf.o").exists()
    assert (lib_bpf / os.uname().machine / "hangtrace.bpf.o").read_bytes() == b"x"
