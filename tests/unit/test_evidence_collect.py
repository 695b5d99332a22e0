"""Evidence collectors (tracer/record/evidence): kernel log records, /proc/PID/maps, library
versions, ELF version strings, log targets and vitals, capture sites in Python stacks; tables
of real inputs, and this machine's /proc for the readers."""
from __future__ import annotations

import errno
import os
import shutil
import time

import pytest

from fake_gpu_libs import build_fake_libs
from tracer import events as ev
from tracer.events.evidence import KernelLog
from tracer.record.evidence import capture, elfver, kmsg, libs, procinfo

HAVE_GCC = shutil.which("gcc") is not None


# --------------------------------------------------------------------------- /dev/kmsg
@pytest.mark.parametrize("record,usec,message", [
    # this VM's first record
    (b"5,0,0,-;Linux version 6.18.44-fc-v595 (builder@sandboxing) #1 SMP\n", 0,
     "Linux version 6.18.44-fc-v595 (builder@sandboxing) #1 SMP"),
    # an Xid with the dictionary lines the kernel appends
    (b"4,1201,5140900123,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen "
     b"off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n", 5140900123,
     "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus."),
    # newer kernels add fields after the flags (caller id)
    (b"6,339,1843308145,-,caller=T1;NVRM: GPU at PCI:0000:01:00: GPU-34d7319c\n", 1843308145,
     "NVRM: GPU at PCI:0000:01:00: GPU-34d7319c"),
])
def test_parse_record(record, usec, message):
    assert kmsg.parse_record(record) == (usec, message)


def test_parse_record_rejects_what_is_not_one():
    assert kmsg.parse_record(b"no separator here\n") is None
    assert kmsg.parse_record(b"6,x;message") is None


@pytest.mark.parametrize("line,nvrm", [
    ("NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000009 intr 00800000", True),
    ("NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120, intr 10000000", True),
    ("NVRM: GPU at 0000:01:00.0 has fallen off the bus.", True),
    # one printk with newlines: /dev/kmsg escapes them
    ("NVRM: The NVIDIA GPU 0000:b3:00.0\\x0a NVRM: (PCI ID: 10de:26b5) installed in this system "
     "has\\x0a NVRM: fallen off the bus and is not responding to commands.", True),
    ("NVRM: GPU at PCI:0000:01:00: GPU-34d7319c-5b19-1e75-186d-c187099e4fe5", False),
    ("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build", False),
    ("nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007, Severity 1", False),
])
def test_is_nvrm_line(line, nvrm):
    assert kmsg.is_nvrm_line(line) is nvrm


def _reader(records):
    it = iter(records)

    def read():
        r = next(it, None)
        if r is None:
            raise BlockingIOError()
        if isinstance(r, OSError):
            raise r
        return r
    return read


def test_scan_keeps_nvrm_lines_since_and_counts_overwritten():
    wall, mono = 1_000_000.0, 5000.0            # booted at wall - mono
    recs = [b"6,1,1000000000,-;NVRM: Xid (PCI:0000:18:00): 13, old one\n",     # 1000 s
            b"6,2,4000000000,-;usb 1-1: new device\n",
            OSError(errno.EPIPE, "overwritten"),
            b"6,3,4990000000,-;NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n"]
    log = KernelLog(ts=wall)
    kmsg.scan_records(_reader(recs), log, since=wall - 100, wall=wall, mono_now=mono)
    assert log.scanned == 3
    assert log.lines == [(wall - 10.0, "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off "
                                       "the bus.")]
    assert "1 records were overwritten" in log.why


def test_scan_stops_at_its_bound():
    log = KernelLog(ts=0.0)
    kmsg.scan_records(lambda: b"6,1,1,-;x\n", log, None, 0.0, 0.0, max_records=50)
    assert log.scanned == 50 and log.why.startswith("read in part")


def test_missing_kmsg_is_one_line():
    log = kmsg.read_nvrm_lines(None, "/nonexistent/kmsg")
    assert log.lines == [] and log.why.startswith("no /nonexistent/kmsg here")


def test_this_machines_kmsg_reads_or_says_why():
    log = kmsg.read_nvrm_lines(time.time() - 60)
    assert log.scanned > 0 or log.why


# --------------------------------------------------------------------------- maps, versions
MAPS = """\
55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 1051 /usr/bin/python3.12
7f1c00000000-7f1c00200000 r--p 00000000 fd:01 2231 /usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2
7f1c00200000-7f1c08000000 r-xp 00200000 fd:01 2231 /usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2
7f1c10000000-7f1c10100000 r--p 00000000 fd:01 777 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04
7f1c20000000-7f1c20100000 r-xp 00000000 fd:01 901 /usr/local/lib/python3.12/dist-packages/torch/lib/libtorch_cuda.so
7f1c30000000-7f1c30100000 r-xp 00000000 fd:01 950 /usr/local/lib/python3.12/dist-packages/nvidia/cuda_runtime/lib/libcudart.so.12
7f1c40000000-7f1c40100000 r-xp 00000000 fd:01 960 /usr/local/lib/python3.12/dist-packages/sgl_kernel/common_ops.abi3.so
7f1c50000000-7f1c50100000 r-xp 00000000 fd:01 970 /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so
7f1c60000000-7f1c60100000 r-xp 00000000 00:2a 11 /root/.cache/flashinfer/0.2.5/90/cached_ops/batch_decode/batch_decode.so (deleted)
7f1c70000000-7f1c70021000 rw-p 00000000 00:00 0
7ffd0000000-7ffd0021000 rw-p 00000000 00:00 0                          [stack]
"""


def test_every_library_known_needs_its_needle():
    """libs.may_map skips a maps text without any NEEDLES: each LIBRARIES pattern can match
    only a path that holds one of its name's needles."""
    for name, rx in libs.LIBRARIES:
        needles = libs.NEEDLES[name]
        pattern = rx.pattern.replace("\\.", ".")
        assert any(n in pattern for n in needles), name
    assert set(libs.NEEDLES) == {n for n, _ in libs.LIBRARIES}
    assert not libs.may_map("7f00-7f01 r-xp 0 08:01 5 /usr/lib/libc.so.6\n", libs.NEEDLES)
    assert libs.may_map("7f00-7f01 r-xp 0 08:01 5 /opt/x/libnccl.so.2 (deleted)\n", ["nccl"])


def test_parse_maps_and_identify():
    files = libs.parse_maps(MAPS)
    assert files[1] == ("/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                        "fd:01:2231")
    # anonymous and [stack] mappings skipped, repeated mappings of one file folded
    assert [libs.identify(p) for p, _ in files] == [
        None, "nccl", "libcuda", "torch", "cudart", "sgl-kernel", "vllm", "flashinfer"]
    assert files[-1][0].endswith("batch_decode.so")       # " (deleted)" removed


def _site(tmp_path):
    """A site-packages tree with the version files the real packages ship."""
    site = tmp_path / "site-packages"
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "torch" / "version.py").write_text(
        "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', "
        "'hip']\n__version__ = '2.11.0+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\n")
    (site / "vllm").mkdir()
    (site / "vllm" / "_version.py").write_text(
        "# file generated by setuptools-scm\n__version__ = version = '0.9.1'\n"
        "__version_tuple__ = version_tuple = (0, 9, 1)\n")
    (site / "sgl_kernel").mkdir()
    (site / "sgl_kernel" / "version.py").write_text('__version__ = "0.1.9"\n')
    (site / "nvidia" / "nccl" / "lib").mkdir(parents=True)
    (site / "nvidia_nccl_cu12-2.21.5.dist-info").mkdir()
    (site / "nvidia" / "cuda_runtime" / "lib").mkdir(parents=True)
    (site / "nvidia_cuda_runtime_cu12-12.8.90.dist-info").mkdir()
    return site


@pytest.mark.parametrize("name,rel,version,source", [
    ("torch", "torch/lib/libtorch_cuda.so", "2.11.0+cu128", "torch/version.py"),
    ("vllm", "vllm/_C.abi3.so", "0.9.1", "vllm/_version.py"),
    ("sgl-kernel", "sgl_kernel/common_ops.abi3.so", "0.1.9", "sgl_kernel/version.py"),
    ("nccl", "nvidia/nccl/lib/libnccl.so.2", "2.21.5", "nvidia_nccl_cu12-2.21.5.dist-info"),
    ("cudart", "nvidia/cuda_runtime/lib/libcudart.so.12", "12.8.90",
     "nvidia_cuda_runtime_cu12-12.8.90.dist-info"),
])
def test_versions_from_package_files(tmp_path, name, rel, version, source):
    path = str(_site(tmp_path) / rel)
    got = libs._version_of(name, path, os.getpid(), path)   # this process: root "/"
    assert (got["version"], got["source"]) == (version, source)
    if name == "torch":
        assert got["detail"] == "cuda 12.8"


@pytest.mark.parametrize("name,path,version", [
    ("libcuda", "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", "580.159.04"),
    ("cudart", "/usr/local/cuda-12.4/lib64/libcudart.so.12.4.127", "12.4.127"),
    ("flashinfer", "/root/.cache/flashinfer/0.2.5/90/cached_ops/x/x.so", "0.2.5"),
])
def test_versions_from_file_names(name, path, version):
    assert libs._version_of(name, path, os.getpid())["version"] == version


def test_no_version_is_no_guess():
    assert libs._version_of("libcuda", "/usr/lib/libcuda.so.1", os.getpid()) == {}


@pytest.mark.skipif(not HAVE_GCC, reason="gcc not installed")
def test_nccl_version_string_from_elf(tmp_path):
    built = build_fake_libs(tmp_path, nccl_version="2.27.3")
    assert elfver.nccl_version(str(built["nccl"])) == ("2.27.3", "+cuda12.4")
    assert elfver.nccl_version(str(built["cuda"])) is None        # no such string
    (tmp_path / "text").write_text("NCCL version 2.21.5+cuda12.4\n")
    assert elfver.nccl_version(str(tmp_path / "text")) is None    # not an ELF file


@pytest.mark.parametrize("data,groups", [
    (b"\x00NCCL version 2.21.5+cuda12.4\x00", (b"2", b"21", b"5", b"", b"12", b"4")),
    (b"\x00NCCL version 2.27.3+cuda12.9\x00", (b"2", b"27", b"3", b"", b"12", b"9")),
    (b"\x00NCCL version 2.18.1a0+cuda12.1\x00", (b"2", b"18", b"1", b"a0", b"12", b"1")),
    (b"\x00NCCL version 2.20.5\x00", (b"2", b"20", b"5", b"", None, None)),   # no +cuda
    (b"\x00NCCL version %s\x00", None),                                       # a format
])
def test_nccl_version_regex(data, groups):
    m = elfver.NCCL_RE.search(data)
    assert (m.groups() if m else None) == groups


def test_section_search_reads_across_chunks(tmp_path, monkeypatch):
    if not HAVE_GCC:
        pytest.skip("needs gcc")
    built = build_fake_libs(tmp_path)
    monkeypatch.setattr(elfver, "CHUNK", 7)          # the string spans many chunks
    monkeypatch.setattr(elfver, "OVERLAP", 64)
    assert elfver.nccl_version(str(built["nccl"])) == ("2.21.5", "+cuda12.4")


def test_loaded_libs_of_this_process():
    out = libs.read_loaded_libs([os.getpid()])
    mine = [e for e in out if getattr(e, "pid", None) == os.getpid()]
    assert len(mine) == 1 and isinstance(mine[0].libs, list)


def test_unreadable_maps_is_a_note():
    out = libs.read_loaded_libs([2 ** 22 + 5])     # above pid_max: no such process
    assert out == [] or all(getattr(e, "pid", 0) == 0 for e in out)


# --------------------------------------------------------------------------- logs, vitals
@pytest.mark.parametrize("path,flags,log", [
    ("/srv/logs/server.log", 0o100001, True),
    ("/var/log/app/out.txt", 0o100001, True),
    ("/tmp/worker.err.3", 0o100001, True),
    ("/data/results.bin", 0o102001, True),           # O_APPEND
    ("/data/results.bin", 0o100001, False),
    ("/dev/shm/nccl-abc.log", 0o102002, False),
    ("/root/.triton/cache/x.json", 0o100001, False),
])
def test_looks_like_log(path, flags, log):
    assert procinfo.looks_like_log(path, flags) is log


def test_log_targets_and_vitals_of_this_process(tmp_path):
    path = tmp_path / "server.log"
    with open(path, "a") as f:
        f.write("server starting\n")
        f.flush()
        t = procinfo.read_log_targets(os.getpid(), phase="end")
        v = procinfo.read_vitals(os.getpid(), phase="end")
    mine = [x for x in t.targets if x["path"] == str(path)]
    assert len(mine) == 1 and mine[0]["role"] == "log" and mine[0]["size"] == 16
    assert abs(mine[0]["mtime"] - os.stat(path).st_mtime) < 0.01
    assert {x["role"] for x in t.targets} >= {"stdout", "stderr"} or not t.why
    assert v.rss_bytes > 1 << 20 and v.cpu_s >= 0 and v.num_threads >= 1
    assert abs(v.start_time - time.time()) < 24 * 3600 * 365


def test_log_stat_that_hangs_times_out(monkeypatch):
    def slow_stat(path):
        time.sleep(5)
    monkeypatch.setattr(procinfo.os, "stat", slow_stat)
    t0 = time.monotonic()
    out = procinfo._stat_all({1: "/proc/self/fd/1"}, timeout=0.2)
    assert time.monotonic() - t0 < 2
    assert out[1].startswith("stat timed out")


def test_gone_process():
    assert procinfo.read_vitals(2 ** 22 + 5) is None
    assert procinfo.read_log_targets(2 ** 22 + 5).why == "the process is gone"


# --------------------------------------------------------------------------- capture sites
SGLANG_RUNNER = '''\
class CudaGraphRunner:
    def capture_one_batch_size(self, bs: int, forward):
        graph = torch.cuda.CUDAGraph()
        for _ in range(2):
            torch.cuda.synchronize()
            self.model_runner.tp_group.barrier()

            run_once()

        global global_graph_memory_pool
        with torch.cuda.graph(graph, pool=global_graph_memory_pool, stream=stream):
            out = run_once()

        global_graph_memory_pool = graph.pool()
        return graph, out

    def capture(self):
        with graph_capture() as graph_capture_context:
            self.stream = graph_capture_context.stream
            for bs in self.capture_bs:
                self.capture_one_batch_size(bs, forward)
'''


def test_graph_with_blocks():
    blocks = capture.graph_with_blocks(SGLANG_RUNNER)
    assert (12, 12, "torch.cuda.graph(graph, pool=global_graph_memory_pool, stream=stream)",
            "with-block") in blocks
    assert (19, 21, "graph_capture()", "phase") in blocks
    assert capture.graph_with_blocks("def broken(:\n") == []


@pytest.mark.parametrize("source", [
    SGLANG_RUNNER,
    "with torch.cuda.graph(\n    g,\n    pool=p):\n  0\n",
    "x = 1\r\nwith graph(a,\r\n b) as é, graph_capture():\r\n  0\r\n",
    "x = 1\rwith graph('ü€', \r 2):\r  0\r",
    "\fwith  graph( 'π' ) :\n\tpass\n",
    "async def f():\n    async with graph(x), y(\n 1):\n        0\n",
])
def test_source_segment_is_what_ast_gives(source):
    import ast
    lines = capture.source_lines(source)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.expr):
            assert capture.source_segment(lines, node) == \
                (ast.get_source_segment(source, node) or ""), ast.dump(node)


def test_with_blocks_of_a_long_source_in_linear_time():
    """3,000 ``with graph():`` statements (54 KB, a source a target's stack names): main spent
    about 12 s of CPU in ast.get_source_segment, which splits the whole source per call (issue 46
    item 5); the source is split once now (about 0.05 s)."""
    source = "with graph():\n  0\n" * 3000
    t = time.process_time()
    blocks = capture.graph_with_blocks(source)
    assert len(blocks) == 3000 and time.process_time() - t < 2.0


@pytest.mark.parametrize("frame,parsed", [
    ("CUDAGraph.capture_begin (torch/cuda/graphs.py:104)",
     ("CUDAGraph.capture_begin", "torch/cuda/graphs.py", 104)),
    ("<module> (<string>)", ("<module>", "<string>", None)),
    ("f (x.py:" + "9" * 5000 + ")", ("f", "x.py:" + "9" * 5000, None)),   # issue 46 item 6
    ("f (x.py:٣)", ("f", "x.py:٣", None)),
    ("run_once (sglang/srt/model_executor/cuda_graph_runner.py:588)",
     ("run_once", "sglang/srt/model_executor/cuda_graph_runner.py", 588)),
])
def test_parse_frame(frame, parsed):
    assert capture.parse_frame(frame) == parsed


def _stack(frames, files, pid=None):
    return ev.PyStack(ts=1.0, pid=pid or os.getpid(), tid=7, frames=frames, files=files)


def test_capture_sites_from_stacks(tmp_path):
    src = tmp_path / "sglang" / "srt" / "model_executor" / "cuda_graph_runner.py"
    src.parent.mkdir(parents=True)
    src.write_text(SGLANG_RUNNER)
    f = str(src)
    inside = _stack(["all_reduce (torch/distributed/distributed_c10d.py:2501)",
                     "run_once (sglang/srt/model_executor/cuda_graph_runner.py:8)",
                     "CudaGraphRunner.capture_one_batch_size (sglang/srt/model_executor/"
                     "cuda_graph_runner.py:12)"], ["/x/distributed_c10d.py", f, f])
    warmup = _stack(["barrier (torch/distributed/distributed_c10d.py:4200)",
                     "CudaGraphRunner.capture_one_batch_size (sglang/srt/model_executor/"
                     "cuda_graph_runner.py:6)",
                     "CudaGraphRunner.capture (sglang/srt/model_executor/cuda_graph_runner.py:"
                     "21)"], ["/x/distributed_c10d.py", f, f])
    begin = _stack(["CUDAGraph.capture_begin (torch/cuda/graphs.py:104)",
                    "graph.__enter__ (torch/cuda/graphs.py:186)", "main (x.py:3)"],
                   ["/usr/lib/torch/cuda/graphs.py", "/usr/lib/torch/cuda/graphs.py", "/x.py"])
    unreadable = _stack(["CudaGraphRunner.capture_one_batch_size (sglang/srt/model_executor/"
                         "cuda_graph_runner.py:12)"], ["/nonexistent/cuda_graph_runner.py"])
    plain = _stack(["wait (threading.py:327)"], ["/usr/lib/python3.12/threading.py"])
    # the test's files are read through /proc/PID/root: this process's root is "/"
    sites = capture.capture_sites([inside, warmup, begin, unreadable, plain])
    got = [(s.how, s.detail) for s in sites]
    assert got == [
        ("with-block", "with torch.cuda.graph(graph, pool=global_graph_memory_pool, "
                       "stream=stream)"),
        ("phase", "with graph_capture()"),
        ("capture-call", "CUDAGraph.capture_begin"),
        ("runner", "CudaGraphRunner.capture_one_batch_size")]
    assert sites[0].frame.endswith("cuda_graph_runner.py:12)")


def test_with_capture_sites_wraps_a_probe():
    stack = _stack(["CUDAGraph.capture_end (torch/cuda/graphs.py:120)"], ["/t/torch/cuda/graphs.py"])
    probe = capture.with_capture_sites(lambda pids, an=None: [stack])
    out = list(probe([1]))
    assert out[0] is stack and out[1].how == "capture-call"
