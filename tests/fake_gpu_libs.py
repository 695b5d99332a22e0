"""Build the stand-ins for libcuda and libnccl (fixtures/scenarios/lib/*.c) that the evidence
tests load into scenario processes on machines without a GPU (gcc -shared -fPIC)."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Dict

LIB_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios" / "lib"
DRIVER = "580.159.04"


def build_fake_libs(out: Path, nccl_version: str = "2.21.5") -> Dict[str, Path]:
    """{"cuda": .../libcuda.so.580.159.04, "nccl": .../libnccl.so.2} built into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    cuda = out / f"libcuda.so.{DRIVER}"
    nccl = out / "libnccl.so.2"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(cuda),
                    str(LIB_DIR / "fake_libcuda.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f'-DVERSION="{nccl_version}"', "-o",
                    str(nccl), str(LIB_DIR / "fake_libnccl.c")], check=True)
    return {"cuda": cuda, "nccl": nccl}
