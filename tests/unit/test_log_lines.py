"""Log lines as templates (record/probes/log_lines.py) and news against heartbeat
(analysis/progress/log_lines.py): tables of real lines of SGLang, vLLM, PyTorch and
safetensors loaders, and the judgement of a window's lines."""
from __future__ import annotations

import pytest

from tracer.analysis.progress.log_lines import judge_log
from tracer.events.evidence import LogLines
from tracer.record.probes.log_lines import split_lines, line_template, templates_of

SGLANG_IDLE = ("[2025-03-18 09:14:05 TP0] Decode batch. #running-req: 0, #token: 0, "
               "token usage: 0.00, gen throughput (token/s): 0.00, #queue-req: 0")


@pytest.mark.parametrize("line,template,values", [
    (SGLANG_IDLE, "[<T> TP<N>] Decode batch. #running-req: <N>, #token: <N>, token usage: <N>, "
                  "gen throughput (token/s): <N>, #queue-req: <N>", [0, 0, 0, 0, 0, 0]),
    ("INFO 03-18 09:14:05 metrics.py:455] Avg prompt throughput: 0.0 tokens/s, Avg generation "
     "throughput: 31.4 tokens/s, Running: 2 reqs",
     "INFO <N>-<N> <T> metrics.py:<N>] Avg prompt throughput: <N> tokens/s, Avg generation "
     "throughput: <N> tokens/s, Running: <N> reqs", [3, 18, 455, 0.0, 31.4, 2]),
    ("Loading safetensors checkpoint shards:  38% Completed | 3/8 [00:41<00:52, 10.6s/it]",
     # issue 44 item 4: the clocks (elapsed, left) and the rate change at every redraw
     "Loading safetensors checkpoint shards:  <N>% Completed | <N>/<N> [<T><<T>, <R>]",
     [38, 3, 8]),
    ("[rank1]:[W318 09:14:05.123456 ProcessGroupNCCL.cpp:1168] heartbeat at 1742289245.5",
     "[rank<N>]:[W<N> <T> ProcessGroupNCCL.cpp:<N>] heartbeat at <T>", [1, 318, 1168]),
    ("NCCL INFO comm 0x55d3c8a0 rank 0 nranks 2 cudaDev 0 busId 0x1b000 - Init COMPLETE",
     "NCCL INFO comm <H> rank <N> nranks <N> cudaDev <N> busId <H> - Init COMPLETE", [0, 2, 0]),
    ("step 17: loss=2.3456e-01 lr=3e-4", "step <N>: loss=<N> lr=<N>", [17, 0.23456, 3e-4]),
    # loghub's HDFS, OpenSSH, BGL and OpenStack lines (bench/log_templates.py): addresses,
    # block ids, numbered files and UUIDs are one shape each
    ("BLOCK* NameSystem.addStoredBlock: blockMap updated: 10.251.43.192:50010 is added to "
     "blk_-1608999687919862906 size 91178",
     "BLOCK* NameSystem.addStoredBlock: blockMap updated: <A> is added to blk_-<N> size <N>",
     [1608999687919862906.0, 91178]),
    ("Invalid user admin from 187.141.143.180", "Invalid user admin from <A>", []),
    ("generating core.4183", "generating core.<N>", [4183]),
    ("GET /v2/54fadb412c4e40cdbaed9335e4c35a9e/servers/detail?all_tenants=1",
     "GET /v<N>/<H>/servers/detail?all_tenants=<N>", [2, 1]),
    ("instance: b9000564-fe1a-409b-b8cc-1e88b294cd1d spawned in 19.84 s",
     "instance: <H> spawned in <N> s", [19.84]),
])
def test_line_templates(line, template, values):
    assert line_template(line) == (template, values)


def _lines(before, window):
    templates, _ = templates_of(before, window)
    return LogLines(ts=1.0, pid=1, fd=3, path="/var/log/x.log", appended=100, read=100,
                    lines=len(window), templates=templates)


def test_a_stats_line_at_zero_throughput_is_a_heartbeat():
    e = _lines([SGLANG_IDLE] * 3, [SGLANG_IDLE.replace("09:14:05", f"09:14:{7 + 2 * i:02d}")
                                   for i in range(4)])
    news = judge_log(e)
    assert news is not None and news.heartbeat and "4 lines, 1 shape" in news.text


@pytest.mark.parametrize("before,window,words", [
    ([SGLANG_IDLE], [SGLANG_IDLE.replace("#token: 0", "#token: 512")], "moved 0 -> 512"),
    ([], ["compiling kernel fused_moe_a.so", "compiling kernel fused_moe_b.so"],
     "a new line"),
    ([SGLANG_IDLE] * 2, [SGLANG_IDLE, "Loading safetensors checkpoint shards: 4/8"],
     "a new line 'Loading"),
])
def test_news(before, window, words):
    news = judge_log(_lines(before, window))
    assert news is not None and not news.heartbeat and words in news.text


def test_a_shape_seen_once_before_the_window_and_once_in_it_is_a_repeat():
    assert judge_log(_lines([SGLANG_IDLE], [SGLANG_IDLE])).heartbeat


def test_no_line_is_no_judgement():
    assert judge_log(_lines([SGLANG_IDLE], [])) is None


def test_the_split_at_the_window_start():
    # the read began inside "old-1" (cut: dropped); "spa" + "nning" is the window's line
    before, window = split_lines(b"d-1\nold-2\nspa", b"nning\nnew\npartial")
    assert before == ["old-2"] and window == ["spanning", "new", "partial"]
    assert split_lines(b"", b"a\nb\n") == ([], ["a", "b"])


@pytest.mark.parametrize("data,binary", [
    (b"[2025-03-18 09:14:05 TP0] Decode batch. #running-req: 0\n", False),
    ("Loading shards: 38% \u2588\u2588\u2588\u2588 3/8\n".encode(), False),
    (b"\x1b[32mINFO\x1b[0m ready\r\n\tindented\n", False),
    (b"caf\xc3", False),                                # a character cut by the read's end
    (bytes(range(256)) * 4, True),                      # an object file
    (b"abc\0def\n", True),
    (b"\xff\xfe\xfdnot utf-8 at all here\n", True),
])
def test_binary_files_are_not_logs(data, binary):
    from tracer.record.probes.log_lines import is_binary
    assert is_binary(data) is binary


def test_a_binary_file_gets_no_templates():
    from tracer.events.evidence import LogLines
    from tracer.record.probes.log_lines import TemplateMemory, fill_lines
    ev = fill_lines(LogLines(ts=1.0, pid=1, fd=3, path="/tmp/build-0.o"),
                    bytes(range(256)) * 8, 2048, TemplateMemory())
    assert ev.templates == [] and ev.why == "not a text log (binary data)" and ev.appended == 2048


TQDM = "Capturing batches (bs={bs} avail_mem=41.20 GB):  {pct}%|#####     | {n}/52 [00:{s:02d}<00:14,  2.10it/s]"


@pytest.mark.parametrize("before,window,words", [
    # a tqdm bar as SGLang's CUDA graph capture prints it: how much is left
    ([TQDM.format(bs=160, pct=44, n=23, s=10)],
     [TQDM.format(bs=160 - 8 * i, pct=46 + 2 * i, n=24 + i, s=11 + i) for i in range(8)],
     "31 of 52 done, 21 left"),
    (["Loading safetensors checkpoint shards: 2/8"],
     ["Loading safetensors checkpoint shards: 3/8", "Loading safetensors checkpoint shards: 4/8"],
     "moved 2 -> 4 in 'Loading safetensors checkpoint shards: <N>/<N>', 4 of 8 done, 4 left"),
    # a ratio whose "total" moves too is no count against a total
    (["hit ratio 10/20"], ["hit ratio 11/21", "hit ratio 12/22"], "moved 10 -> 12"),
])
def test_a_count_against_its_total_says_what_is_left(before, window, words):
    news = judge_log(_lines(before, window))
    assert news is not None and not news.heartbeat and words in news.text, news
    if "ratio" in words or "ratio" in before[0]:
        assert " left" not in news.text


def test_a_progress_bar_redrawn_after_carriage_returns_is_lines():
    before = b"Loading weights:  10%| 1/10\r"
    window = b"Loading weights:  20%| 2/10\rLoading weights:  30%| 3/10\r"
    head, lines = split_lines(b"x\n" + before, window)
    assert head == ["Loading weights:  10%| 1/10"]
    assert lines == ["Loading weights:  20%| 2/10", "Loading weights:  30%| 3/10"]
    news = judge_log(_lines(head, lines))
    assert "3 of 10 done, 7 left" in news.text


def test_a_log_that_did_not_grow_is_not_opened(tmp_path, monkeypatch):
    """log_lines_probe stats each held file first: one whose size is what the start saw is
    not read (a 2,000-process tree sharing one stderr file opened it 2,000 times)."""
    import os
    from types import SimpleNamespace
    from tracer.events.evidence import LogTargets
    from tracer.record.probes import log_lines
    same, grown = tmp_path / "same.log", tmp_path / "grown.log"
    same.write_text("old line 1\n")
    grown.write_text("old line 1\n")
    with open(same, "a") as a, open(grown, "a") as b:
        start = LogTargets(ts=0.0, pid=os.getpid(), phase="start", targets=[
            {"fd": a.fileno(), "role": "log", "kind": "file", "path": str(same), "size": 11},
            {"fd": b.fileno(), "role": "log", "kind": "file", "path": str(grown), "size": 11}])
        analyzer = SimpleNamespace(evidence=SimpleNamespace(logs={os.getpid(): {"start": start}}))
        b.write("step 2 loss 0.5\n")
        b.flush()
        opened = []
        real = log_lines.read_held_file
        monkeypatch.setattr(log_lines, "read_held_file",
                            lambda pid, fd, **k: opened.append(fd) or real(pid, fd, **k))
        got = log_lines.log_lines_probe([os.getpid()], analyzer)
        assert opened == [b.fileno()]
        assert [(e.fd, e.lines) for e in got] == [(b.fileno(), 1)]
