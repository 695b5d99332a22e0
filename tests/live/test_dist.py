"""The manylinux wheel (auditwheel; one cp310-abi3 wheel, installed on every CPython found), the
pure py3-none-any wheel and the sdist, each installed into a fresh venv outside the checkout,
work on their own: scripts/check_dist.py builds them and runs --version, doctor (compiled
helpers loaded),
an import, the demo (a Python and a C scenario), attach -b ebpf on a live process (the pure
wheel's through its CO-RE objects, in a venv without the system site-packages: no BCC), the man page,
and an install with a compiler that fails (the pure path). It takes minutes and needs the
package index: it runs in CI (CI=true) or with HANGTRACE_TEST_DIST=1, and is skipped otherwise
with that reason."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_dist.py"


@pytest.mark.slow
def test_the_wheel_and_the_sdist_work_installed():
    if not (os.environ.get("CI") or os.environ.get("HANGTRACE_TEST_DIST")):
        pytest.skip("builds and installs the wheel and sdist (minutes, the package index): "
                    "CI=true or HANGTRACE_TEST_DIST=1 runs it")
    p = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                       timeout=2400)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert lines[-1] == "check_dist: ok"
    assert any("attach -b ebpf" in line for line in lines)
    assert any("pure Python" in line for line in lines)
    assert any("manylinux_2_" in line and "cp3" in line for line in lines)     # auditwheel's
    assert any(line.startswith("check_dist: installing the pure-wheel (hangtrace-")
               and "-py3-none-any.whl" in line for line in lines)
    assert any("pure-Python path" in line for line in lines)
    # the pure wheel's eBPF: its own CO-RE objects through libbpf, in a venv where BCC is absent
    assert any("attach -b ebpf" in line and "BCC not importable" in line for line in lines)
    # one compiled wheel, the limited API's, installed and checked on every CPython found
    # (find_pythons: 3.10, 3.11, 3.12 and 3.13 on the development VM and in CI)
    sys.path.insert(0, str(SCRIPT.parent))
    from find_pythons import pythons
    found = pythons()
    said = [line for line in lines if line.startswith("check_dist: ")]
    assert found
    for py in found:
        at = [i for i, line in enumerate(said) if line.startswith(
            f"check_dist: installing the wheel-{os.path.basename(py)} (hangtrace-")]
        assert len(at) == 1 and "-cp310-abi3-manylinux" in said[at[0]], (py, said)
        rest = said[at[0] + 1:at[0] + 9]
        assert any("compiled helpers (_fast.abi3.so)" in line for line in rest), (py, rest)
        assert any("attach -b ebpf on a live process" in line for line in rest), (py, rest)
