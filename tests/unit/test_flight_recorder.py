"""PyTorch Flight Recorder dumps (issue 24): the plain-data pickle reader against hostile
pickles, the dump reader on real dumps (torch 2.13 gloo, fixtures/flight-recorder/skip: rank 1
skipped collective 4), and the analysis' findings (behind, mismatch, missing)."""
from __future__ import annotations

import copy
import io
import json
import os
import pickle
import time
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import report_schema
from tracer.analysis.job.flight_recorder import lags, read_recorder
from tracer.tracefile import fr_pickle
from tracer.tracefile.fr_dump import find_dumps, looks_like_dump, read_dump, read_dumps
from tracer.tracefile.fr_pickle import UnsafePickle, load_plain

SKIP = Path(__file__).resolve().parents[2] / "fixtures" / "flight-recorder" / "skip"
RAN = []


def _mark_ran() -> None:        # what a hostile pickle would call if it could
    RAN.append(1)


class Evil:
    def __reduce__(self):
        return (_mark_ran, ())


class EvilSystem:
    def __reduce__(self):
        import os
        return (os.system, ("touch /tmp/hangtrace-fr-pwned",))


def _deep(n: int) -> bytes:
    """A list nested n deep, as raw opcodes (pickle.dumps itself would recurse)."""
    return b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b"."


@pytest.mark.parametrize("data, words", [
    (pickle.dumps(Evil(), protocol=2), "refused: the pickle names"),
    (pickle.dumps(EvilSystem(), protocol=2), "refused: the pickle names"),
    (pickle.dumps({"entries": [Evil()]}, protocol=4), "refused: the pickle names"),
    (pickle.dumps(io.BytesIO(), protocol=2), "refused: the pickle names"),
    (b"\x80\x02X\xff\xff\xff\x7f" + b"x" * 10, "not a readable pickle"),   # a huge length
    (b"\x80\x04\x8d" + (1 << 62).to_bytes(8, "little") + b"x", "not a readable pickle"),
    (pickle.dumps({"a": list(range(100))}, protocol=2)[:40], "not a readable pickle"),
    (b"", "not a readable pickle"),
    (b"\x80\x02K\x01Q.", "persistent ids"),              # BINPERSID
    (_deep(200), "nested deeper than 64"),
    (b"\x80\x02cos\nsystem\n(S'true'\ntR.", "refused: the pickle names os.system"),
])
def test_hostile_pickles_give_one_line_and_never_run(data, words):
    with pytest.raises(UnsafePickle) as exc:
        load_plain(data)
    assert words in str(exc.value) and "\n" not in str(exc.value)
    assert RAN == [] and not Path("/tmp/hangtrace-fr-pwned").exists()


def test_memo_references_cannot_blow_up(monkeypatch):
    monkeypatch.setattr(fr_pickle, "MAX_NODES", 10_000)
    x: list = []
    for _ in range(30):                         # 2**30 values from 30 shared lists
        x = [x, x]
    with pytest.raises(UnsafePickle, match="more than 10000 values"):
        load_plain(pickle.dumps(x, protocol=2))


def test_input_is_bounded_before_parsing(monkeypatch, tmp_path):
    monkeypatch.setattr(fr_pickle, "MAX_BYTES", 100)
    with pytest.raises(UnsafePickle, match="larger than"):
        load_plain(b"\x80\x02" + b"N" * 200)


def test_plain_data_loads():
    obj = {"a": [1, 2.5, "x", None, True, (1, 2), -(1 << 70)], "b": {"c": []}}
    assert load_plain(pickle.dumps(obj, protocol=2)) == obj
    assert load_plain(pickle.dumps([b"y"], protocol=4)) == [b"y"]   # protocol 2 needs codecs


def test_a_hostile_dump_file_is_one_error_line(tmp_path):
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(pickle.dumps({"entries": [Evil()]}, protocol=2))
    d = read_dump(str(p))
    assert d.rank == 0 and d.entries == [] and "refused" in d.error and RAN == []
    cli = subprocess.run([sys.executable, "-m", "tracer", "analyze", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 1 and RAN == []
    assert cli.stderr.strip().startswith("hangtrace: ") and len(cli.stderr.splitlines()) == 1


# --------------------------------------------------------------------------- real dumps
def test_real_dumps_read():
    assert [r for _, r in find_dumps(str(SKIP))] == [0, 1]
    assert all(looks_like_dump(p) for p, _ in find_dumps(str(SKIP)))
    d0, d1 = read_dumps(str(SKIP))
    assert not d0.error and not d1.error
    assert d0.version == "2.10" and d0.pg_config[0]["ranks"] == "[0, 1]"
    assert [e["collective_seq_id"] for e in d0.entries] == [1, 2, 3, 4]
    assert [e["collective_seq_id"] for e in d1.entries] == [1, 2, 3]
    assert d0.entries[-1]["profiling_name"] == "gloo:all_reduce"
    assert d0.entries[-1]["frames"][0]["name"] == "all_reduce"


def test_real_dumps_name_the_rank_behind():
    rec = read_recorder(read_dumps(str(SKIP)))
    assert [f.kind for f in rec.findings] == ["behind"]
    f = rec.findings[0]
    assert f.ranks == [1] and f.waiting == [0] and f.seq == 4 and f.op == "gloo:all_reduce"
    lag = lags(rec, {0: 100, 1: 101})
    assert [(x.pid, x.rank) for x in lag] == [(101, 1)] and list(lag[0].waiters) == [100]
    assert lags(rec, {0: 100}) == []            # the rank behind is not a traced process


def _variant(tmp_path: Path, edit) -> Path:
    """The real dumps, loaded, changed by ``edit(rank, dump_dict)`` and written back."""
    out = tmp_path / "dumps"
    out.mkdir()
    for p, rank in find_dumps(str(SKIP)):
        d = load_plain(Path(p).read_bytes())
        d = edit(rank, copy.deepcopy(d))
        if d is not None:
            (out / Path(p).name).write_bytes(pickle.dumps(d, protocol=2))
    return out


def test_a_size_mismatch_is_found(tmp_path):
    def edit(rank, d):
        if rank == 1:                      # rank 1 also enters collective 4, with other sizes
            e = copy.deepcopy(d["entries"][-1])
            e.update(collective_seq_id=4, record_id=3, input_sizes=[[2048]], retired=False)
            d["entries"].append(e)
            d["pg_status"]["0"]["last_enqueued_collective"] = 4
        return d
    rec = read_recorder(read_dumps(str(_variant(tmp_path, edit))))
    kinds = {f.kind: f for f in rec.findings}
    assert "behind" not in kinds and kinds["mismatch"].seq == 4
    assert "input sizes" in kinds["mismatch"].text and "[[2048]]" in kinds["mismatch"].text


def test_an_op_mismatch_is_found(tmp_path):
    def edit(rank, d):
        if rank == 1:
            e = copy.deepcopy(d["entries"][-1])
            e.update(collective_seq_id=4, profiling_name="gloo:broadcast")
            d["entries"].append(e)
            d["pg_status"]["0"]["last_enqueued_collective"] = 4
        return d
    rec = read_recorder(read_dumps(str(_variant(tmp_path, edit))))
    assert [f.kind for f in rec.findings] == ["mismatch"]
    assert "operation" in rec.findings[0].text and "gloo:broadcast" in rec.findings[0].text


def test_a_rank_without_a_dump_is_the_suspect(tmp_path):
    def edit(rank, d):
        if rank == 1:
            return None                     # rank 1 wrote nothing
        d["pg_config"][""]["ranks"] = "[0, 1]"
        return d
    rec = read_recorder(read_dumps(str(_variant(tmp_path, edit))))
    assert [f.kind for f in rec.findings] == ["missing"] and rec.findings[0].ranks == [1]


def test_json_dumps_read_too(tmp_path):
    d = load_plain((SKIP / "fr_rank_0").read_bytes())
    d["pg_status"] = {k: {s: str(v) for s, v in st.items()} for k, st in d["pg_status"].items()}
    p = tmp_path / "fr_rank_0"
    p.write_text(json.dumps(d))
    ev = read_dump(str(p))
    assert not ev.error and ev.pg_status[0]["last_enqueued_collective"] == 4


def test_analyze_dir_of_dumps_alone():
    p = subprocess.run([sys.executable, "-m", "tracer", "analyze", str(SKIP), "--json"],
                       capture_output=True, text=True, timeout=60)
    doc = json.loads(p.stdout)
    report_schema.check(doc)
    assert p.returncode == 7 and doc["verdict"] == "unknown"
    assert doc["root_cause"]["summary"].startswith("rank 1 enqueued collectives up to 3")
    assert doc["flight_recorder"]["findings"][0]["ranks"] == [1]


def test_dumps_given_beside_a_trace_are_put_on_its_ranks_by_rank():
    """The skip recording less the dumps the probe saved, plus the dumps read from their
    directory (pid 0: no environment says whose they are): the ranks' RANK places them."""
    from tracer.load.trace import analyzer_for
    from tracer.events.stacks import FlightRecorderDump
    from tracer.tracefile.format import TraceReader
    trace = SKIP.parents[1] / "traces" / "fr_skip.cpu.htrace.gz"
    reader = TraceReader(str(trace))
    an = analyzer_for(reader)
    an.feed_all(e for e in reader.events() if not isinstance(e, FlightRecorderDump))
    for d in read_dumps(str(SKIP)):
        assert d.pid == 0
        an.feed(d)
    info = reader.info
    report = an.report(end=info.end.ts if info.end else None)
    assert report.root_cause["pid"] == 18419 and report.rule == "collective-straggler"
    assert "(Flight Recorder)" in report.root_cause["summary"]
    cli = subprocess.run([sys.executable, "-m", "tracer", "analyze", str(trace), "--fr",
                          str(SKIP), "--json"], capture_output=True, text=True, timeout=60)
    report_schema.check(json.loads(cli.stdout))
    assert json.loads(cli.stdout)["root_cause"]["pid"] == 18419
    bad = subprocess.run([sys.executable, "-m", "tracer", "analyze", str(trace), "--fr",
                          str(SKIP / "nothing_here_")], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "no dump found" in bad.stderr


@pytest.mark.parametrize("rank", ["\u00b2", "\u0663", "1" * 5000, " +1_0"])
def test_a_rank_a_target_writes_is_read_by_the_one_integer_parser(tmp_path, monkeypatch, rank):
    """Issue 46, item 6: ``RANK=²`` in one process's environment made ``int()`` raise inside the
    probe (``isdigit()`` says yes), which turned it off for the whole tree. That process has no
    rank now; the other's dump is read as ever."""
    from tracer.record.probes import flight_recorder as fr
    shutil.copy(SKIP / "fr_rank_1", tmp_path / "d_1")
    me, other = os.getpid(), os.getppid()
    envs = {me: {"TORCH_FR_BUFFER_SIZE": "1", "TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/d_",
                 "RANK": "1"},
            other: {"RANK": rank, "TORCH_NCCL_TRACE_BUFFER_SIZE": "\u00b2"}}
    monkeypatch.setattr(fr.procfs, "read_environ_vars",
                        lambda pid, names, root="/proc": envs.get(pid, {}))
    [e] = fr.flight_recorder_probe([other, me])
    assert (e.path, e.rank, e.pid, e.error) == (f"{tmp_path}/d_1", 1, me, "")
    assert e.entries


@pytest.mark.parametrize("ranks, pg_key", [("[0, \u00b2]", "0"), ("[0, " + "9" * 5000 + "]", "0"),
                                           ("[0, 1]", "\u00b2"), ("[0, 1]", "9" * 5000)])
def test_numbers_a_dump_writes_are_read_by_the_one_integer_parser(tmp_path, ranks, pg_key):
    """Issue 46, item 6: a group's ranks or a status's pg_id of ``²`` or 5,000 digits made
    ``int()`` raise in the analysis (``isdigit()`` says yes): the dumps still read, the odd
    number is no rank and no group."""
    def edit(rank, d):
        for cfg in d["pg_config"].values():
            cfg["ranks"] = ranks
        d["pg_status"] = {pg_key: st for st in d["pg_status"].values()}
        return d
    rec = read_recorder(read_dumps(str(_variant(tmp_path, edit))))
    assert len(rec.dumps) == 2 and not [d for d in rec.dumps if d.error]


def test_a_dump_file_s_rank_is_ascii_digits(tmp_path):
    shutil.copy(SKIP / "fr_rank_1", tmp_path / "d_1")
    shutil.copy(SKIP / "fr_rank_1", tmp_path / "d_\u00b2")
    assert [os.path.basename(p) for p, _ in find_dumps(str(tmp_path / "d_"))] == ["d_1"]


def test_the_whole_probe_stops_reading_at_its_deadline(tmp_path, monkeypatch):
    """Issue 46, item 5: each file was given at least 0.05 s after the probe's 5 s were spent,
    1,024 files of a stuck file system 51 s more. A file not read in time says so."""
    from tracer.linux.target_files import TargetFileRefused
    from tracer.record.probes import flight_recorder as fr
    for n in range(20):
        shutil.copy(SKIP / "fr_rank_1", tmp_path / f"d_{n}")
    me = os.getpid()
    monkeypatch.setattr(fr.procfs, "read_environ_vars", lambda pid, names, root="/proc": {
        "TORCH_FR_BUFFER_SIZE": "1", "TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/d_"})
    asked = []

    def stuck(pid, path, *, max_bytes, seconds, owned, root):  # a hung file system's read
        asked.append(seconds)
        time.sleep(seconds)
        raise TargetFileRefused(f"no answer within {seconds:g} s")

    monkeypatch.setattr(fr, "read_target_file", stuck)
    monkeypatch.setattr(fr, "SECONDS", 0.3)
    events = fr.flight_recorder_probe([me])
    assert len(events) == 20 and sum(asked) < 1.0
    assert "the probe's 0.3 s were spent" in events[-1].error
