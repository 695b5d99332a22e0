"""Memory brought in (record/probes/memory.py, analysis/progress/memory.py): smaps summed per
file from a real smaps excerpt, and the loading judgement from start and end readings: a
loader that faults a file in progresses, a thread whose faults bring nothing in (allocator
churn) or a poll loop with no faults does not."""
from __future__ import annotations

import os
import time

from tracer.analysis.accumulate.stats import ProcessStats
from tracer.analysis.progress.memory import file_growth, loading
from tracer.events.evidence import MemoryProgress
from tracer.record.probes.memory import parse_smaps_files, read_memory

SMAPS = """\
7f3a10000000-7f3a20000000 r--s 00000000 fe:01 1048612                    /models/model-00001-of-00002.safetensors
Size:             262144 kB
KernelPageSize:        4 kB
Rss:               55296 kB
Pss:               55296 kB
7f3a20000000-7f3a20021000 rw-p 00000000 00:00 0 
Size:                132 kB
Rss:                  12 kB
7f3a30000000-7f3a30100000 r--s 10000000 fe:01 1048612                    /models/model-00001-of-00002.safetensors
Rss:                1024 kB
7f3a40000000-7f3a40200000 r-xp 00000000 fe:01 22                         /usr/lib/libc.so.6 (deleted)
Rss:                 800 kB
"""

MIB = 1 << 20


def test_smaps_summed_per_file():
    got = parse_smaps_files(SMAPS)
    assert got == {"/models/model-00001-of-00002.safetensors":
                   ((55296 + 1024) * 1024, "7f3a10000000-7f3a20000000"),
                   "/usr/lib/libc.so.6": (800 * 1024, "7f3a40000000-7f3a40200000")}


def _proc(faults0, faults1, read0=0, read1=0, rss0=100 * MIB, rss1=100 * MIB,
          files0=(), files1=()):
    p = ProcessStats(pid=7)
    p.memory["start"] = MemoryProgress(ts=100.0, pid=7, phase="start", faults={7: faults0},
                                       rss_bytes=rss0, read_bytes=read0, files=list(files0))
    p.memory["end"] = MemoryProgress(ts=105.0, pid=7, phase="end", faults={7: faults1},
                                     rss_bytes=rss1, read_bytes=read1, files=list(files1))
    return p


def test_a_loader_through_mmap_progresses():
    f = "/models/model-00003-of-00008.safetensors"
    p = _proc([1000, 10], [1400, 90], read0=0, read1=400 * MIB,
              files0=[[f, 100 * MIB, 4096 * MIB]], files1=[[f, 500 * MIB, 4096 * MIB]])
    text = loading(p, 7, 5.0)
    assert text is not None and "400 minor and 80 major page faults (96/s)" in text
    assert "read 400.0 MiB from storage (80.0 MiB/s)" in text
    assert file_growth(p, 5.0) == ("loading model-00003-of-00008.safetensors: 500.0 MiB of "
                                   "4.0 GiB resident (+400.0 MiB, 80.0 MiB/s), about 45 s "
                                   "left at that rate")


def test_faults_that_bring_nothing_in_are_not_loading():
    assert loading(_proc([0, 0], [5000, 0]), 7, 5.0) is None        # allocator churn
    assert loading(_proc([0, 0], [7, 0], read1=400 * MIB), 7, 5.0) is None    # too few
    assert loading(_proc([0, 0], [0, 0], read1=400 * MIB), 7, 5.0) is None    # another thread
    assert loading(ProcessStats(pid=7), 7, 5.0) is None              # no readings


WEIGHTS = "/models/model-00001-of-00001.safetensors"


def _two_threads(faults7, faults8, reads7=(0, 0), reads8=(0, 0), grew=160 * MIB):
    p = _proc([0, 0], [0, 0], read1=160 * MIB, rss1=260 * MIB,
              files0=[[WEIGHTS, 0, 1536 * MIB]], files1=[[WEIGHTS, grew, 1536 * MIB]])
    for i, phase in enumerate(("start", "end")):
        m = p.memory[phase]
        m.faults = {7: (0, 0) if i == 0 else faults7, 8: (0, 0) if i == 0 else faults8}
        m.reads = {7: reads7[i], 8: reads8[i]}
    return p


def test_a_few_faults_of_large_folios_load_when_they_are_the_process_s():
    # Linux 6.18 maps up to a large folio (2 MiB) of a file per fault: a loader that brought
    # 152 MiB in made 76 faults in 10.7 s (7/s), under LOAD_MIN_FAULT_RATE.
    p = _two_threads((20, 0), (3, 0))
    text = loading(p, 7, 5.0)
    assert text is not None and "20 minor and 0 major page faults (4/s) (the most of its " \
        "process)" in text and "read 160.0 MiB from storage" in text
    assert loading(p, 8, 5.0) is None                   # fewer faults than its sibling
    # a library paged in lazily behind a hung sync (8 MiB read in 23 s, 24 faults): no file
    # grew at LOAD_FEW_RATE, so a few faults are not a loader's
    assert loading(_two_threads((20, 0), (3, 0), grew=3 * MIB), 7, 5.0) is None


def test_a_thread_s_own_storage_reads_name_it_the_loader():
    p = _two_threads((2, 0), (30, 0), reads7=(0, 150 * MIB), reads8=(0, 0))
    text = loading(p, 7, 5.0)
    assert text is not None and "read 150.0 MiB from storage itself (30.0 MiB/s)" in text
    assert loading(p, 8, 5.0) is not None                # the top faulter, though
    p = _two_threads((2, 0), (3, 0), reads7=(0, 150 * MIB), reads8=(0, 0))
    assert loading(p, 8, 5.0) is None


def test_this_process_is_read():
    ev = read_memory(os.getpid(), "start")
    assert ev.why == "" and os.getpid() in ev.faults and ev.rss_bytes and ev.rss_bytes > MIB
    if len(ev.faults) > 1:                       # per-thread storage reads with threads
        assert set(ev.reads) == set(ev.faults)
    assert set(ev.cpu) == set(ev.faults)
    until = time.process_time() + 0.1                # this thread runs 100 ms more
    while time.process_time() < until:
        pass
    ran = read_memory(os.getpid(), "end").cpu[os.getpid()] - ev.cpu[os.getpid()]
    assert 0.05 <= ran <= 1.0
