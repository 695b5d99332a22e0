"""Kernel stack parsing, NVIDIA driver frames and GPU-library frames (issue 24): tables of real
inputs (this VM's /proc/PID/task/TID/stack, open-gpu-kernel-modules function names, py-spy
--native frames)."""
from __future__ import annotations

import errno

import pytest

from tracer.gpu.frames import driver_frames, gpu_call, library_family
from tracer.linux import kstack
from tracer.linux.kstack import frame_function, parse_stack

# Read on this VM (kernel 6.18): a vfork parent, a futex waiter, a pipe reader.
VFORK = """[<0>] kernel_clone+0x1d3/0x400
[<0>] __do_sys_vfork+0x66/0x90
[<0>] do_syscall_64+0x71/0x290
[<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e
"""
PIPE = "[<0>] anon_pipe_read+0x393/0x440\n[<0>] vfs_read+0x397/0x3d0\n[<0>] ksys_read+0xc3/0xf0\n"
# An unrestricted kernel (kptr_restrict 0) prints the addresses; a module frame names it.
UVM = """[<ffffffffc1a2b3c4>] uvm_spin_loop+0x5e/0x90 [nvidia_uvm]
[<ffffffffc1a20010>] uvm_tracker_wait+0x8d/0x1c0 [nvidia_uvm]
[<ffffffffc1a4f000>] uvm_va_range_destroy+0x11/0x40 [nvidia_uvm]
[<ffffffffc1a00100>] uvm_ioctl+0x1f0/0x1cb0 [nvidia_uvm]
[<ffffffff9e8a1234>] __x64_sys_ioctl+0x95/0xd0
"""


@pytest.mark.parametrize("text, first, n", [
    (VFORK, "kernel_clone+0x1d3/0x400", 4),
    (PIPE, "anon_pipe_read+0x393/0x440", 3),
    (UVM, "uvm_spin_loop+0x5e/0x90 [nvidia_uvm]", 5),
    ("", None, 0),
    ("\n\n", None, 0),
    ("garbage line\n", "garbage line", 1),
])
def test_parse_stack(text, first, n):
    frames = parse_stack(text)
    assert len(frames) == n
    assert (frames[0] if frames else None) == first


def test_parse_stack_is_bounded():
    assert len(parse_stack("[<0>] f+0x1/0x2\n" * 500)) == kstack.MAX_FRAMES


def test_frame_function():
    assert frame_function("uvm_spin_loop+0x5e/0x90 [nvidia_uvm]") == "uvm_spin_loop"
    assert frame_function("kernel_clone+0x1d3/0x400") == "kernel_clone"


@pytest.mark.parametrize("frames, driver", [
    (parse_stack(UVM), 4),                                     # module-named frames
    (["os_acquire_spinlock+0x10/0x20", "_nv012345rm+0x1/0x2", "rm_ioctl+0x5/0x9",
      "nvidia_ioctl+0x3/0x8", "nv_wait_open_complete_interruptible+0x1/0x3"], 5),
    (parse_stack(VFORK), 0),
    (parse_stack(PIPE), 0),
    (["futex_wait_queue+0x60/0x90", "do_futex+0x1/0x2"], 0),
])
def test_driver_frames(frames, driver):
    assert len(driver_frames(frames)) == driver


def test_read_stack_errors_are_one_line(monkeypatch, tmp_path):
    def refuse(path, flags):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(kstack.os, "open", refuse)
    assert kstack.read_stack(1, 1) == ([], kstack.NOT_ROOT)
    monkeypatch.undo()
    (tmp_path / "5" / "task" / "6").mkdir(parents=True)
    frames, why = kstack.read_stack(5, 6, root=str(tmp_path))
    assert frames == [] and "CONFIG_STACKTRACE" in why
    frames, why = kstack.read_stack(5, 7, root=str(tmp_path))
    assert frames == [] and "exited" in why
    (tmp_path / "5" / "task" / "6" / "stack").write_text("")
    assert kstack.read_stack(5, 6, root=str(tmp_path))[1].startswith("the kernel gave an empty")
    (tmp_path / "5" / "task" / "6" / "stack").write_text("[<0>] 0xffffffff9e8a1234\n")
    assert "without symbol names" in kstack.read_stack(5, 6, root=str(tmp_path))[1]
    (tmp_path / "5" / "task" / "6" / "stack").write_text(VFORK)
    assert kstack.read_stack(5, 6, root=str(tmp_path)) == (parse_stack(VFORK), "")


LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
CUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"
NCCL = "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"
CUBLAS = "/usr/local/lib/python3.12/dist-packages/nvidia/cublas/lib/libcublasLt.so.12"
TORCH = "/usr/local/lib/python3.12/dist-packages/torch/lib/libtorch_cuda.so"


@pytest.mark.parametrize("frames, libs, want", [
    # a host thread in a synchronize: libcuda's internal frames have no exported name
    (["0x7f1c2b3a (libcuda.so.1+0x2b3a)", "cuStreamSynchronize (libcuda.so.1)",
      "cudaStreamSynchronize (libtorch_cuda.so)", "synchronize (torch/cuda/__init__.py:985)"],
     [CUDA, CUDA, TORCH, ""], "cuStreamSynchronize (CUDA driver, libcuda.so.580.159.04)"),
    (["ncclAllReduce (libnccl.so.2)", "c10d::ProcessGroupNCCL::allreduce (libtorch_cuda.so)"],
     [NCCL, TORCH], "ncclAllReduce (NCCL, libnccl.so.2)"),
    (["cublasLtMatmul (libcublasLt.so.12)"], [CUBLAS], "cublasLtMatmul (cuBLASLt, "
                                                       "libcublasLt.so.12)"),
    (["0x7f00 (libcuda.so.1+0x7f00)"], [CUDA], "inside libcuda.so.580.159.04 (CUDA driver; "
                                                "no exported symbol names the function)"),
    (["cudaDeviceSynchronize (libtorch_cuda.so)"], [TORCH],     # cudart linked statically
     "cudaDeviceSynchronize (CUDA runtime, libtorch_cuda.so)"),
    (["read (libc.so.6)", "ffi_call (libffi.so.8)"], [LIBC, "/usr/lib/libffi.so.8"], None),
    (["cuda_like (gil.py:3)"], [""], None),                    # a Python frame
    (["customMerge (libfoo.so)"], ["/usr/lib/libfoo.so"], None),
])
def test_gpu_call(frames, libs, want):
    call = gpu_call(frames, libs)
    assert (call.describe() if call else None) == want


def test_library_family():
    assert library_family(CUDA) == "CUDA driver"
    assert library_family("/x/libcudart.so.12") == "CUDA runtime"
    assert library_family(LIBC) is None
