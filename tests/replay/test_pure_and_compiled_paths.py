"""The compiled helpers of the strace importer (tracer/strace/csrc/) give exactly what their
pure-Python twins give, on real logs and on odd text; and a whole import + analysis gives the
same trace and report either way (HANGTRACE_PURE=1 in a subprocess). The trace rows have one
codec (msgspec, tests/unit/test_trace_codec.py). Where the module is not built
(no compiler), it is built into a temporary directory (conftest's compiled_helpers), or the C
side is skipped."""
import gzip
import importlib.util
import json
import os
import random
import subprocess
import sys
from collections import Counter

import pytest

from tracer import events as ev
from tracer.strace import fastpath
from tracer.strace.args import py_first_arg
from tracer.strace.lines import py_split_line
from tracer.strace.scan import py_scan_block

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
ROOT = os.path.join(HERE, "..")
DATA = os.path.join(HERE, "data", "strace")
FIXTURES = os.path.join(ROOT, "fixtures", "gpu-h200")
LOGS = [os.path.join(FIXTURES, n) for n in sorted(os.listdir(FIXTURES)) if n.endswith(".gz")] \
    + [os.path.join(DATA, n) for n in sorted(os.listdir(DATA)) if n.endswith(".log")] \
    + [os.path.join(DATA, "field", n) for n in sorted(os.listdir(os.path.join(DATA, "field")))
       if n.endswith(".log")]


@pytest.fixture(scope="module")
def fast(compiled_helpers):
    mod = compiled_helpers
    mod.set_fallback("split_line", py_split_line)
    mod.set_fallback("scrub", ev.scrub_args)
    mod.set_fallback("first_arg", py_first_arg)
    return mod


def _lines():
    out = []
    for path in LOGS:
        op = gzip.open if path.endswith(".gz") else open
        with op(path, "rt", errors="surrogateescape") as f:
            out.extend(f.read().splitlines())
    return out


def _mutations(lines, n=20000, seed=5):
    """Odd text made from real lines: cut anywhere, a character changed or doubled, padding,
    non-ASCII, odd numbers in the places numbers go."""
    rnd = random.Random(seed)
    odd = ["é", "\udc80", "+", "-", "_", "x", "0x", "1e5", " ", "<", ">", "(", ")", " = ", "\t",
           "\"", "\\", "...", "resumed>", "<unfinished ...>", "<detached ...>", "?", "E"]
    out = []
    for _ in range(n):
        s = rnd.choice(lines)
        k = rnd.randrange(len(s) + 1)
        r = rnd.random()
        if r < 0.3:
            s = s[:k]
        elif r < 0.7:
            s = s[:k] + rnd.choice(odd) + s[k + 1:]
        else:
            s = s[:k] + rnd.choice(odd) + s[k:]
        out.append(s + rnd.choice(["", "\n", "\r\n"]))
    return out


def test_split_line(fast):
    lines = _lines()
    assert len(lines) > 12000
    odd = ["1 1.5 read(3) = 0xffffffffffffffff (errno 5)", "1 1.5 read(3) = -01 (errno 5)",
           "1 1.5 read(3) = 99999999999999999999 (errno 5)", "1 10:11:12.5 read(3) = -1 (x)",
           "1 1.5 read(3) = -9223372036854775808 (errno 5)", "1 1.5 poll() = ()"]
    for text in lines + odd + _mutations(lines):
        assert repr(fast.split_line(text)) == repr(py_split_line(text)), text


def test_scrub_and_first_arg(fast):
    args = [t[4] for t in map(py_split_line, _lines()) if t is not None]
    odd = ['"a\\"b" x', '"unterminated', '"\\\nx"', '""..., ""', 'a"b"..."c"', '"é", 1',
           '3</a, b>, 4', '3</x>(deleted), 1', '5<TCP:[1.2.3.4:5->6.7.8.9:10]>, 2', '<<<>', '']
    for a in args + odd + _mutations(odd + args[:500], 5000):
        assert fast.scrub(a) == ev.scrub_args(a), a
        assert fast.first_arg(a) == py_first_arg(a), a


def test_scan_block(fast):
    for path in LOGS:
        op = gzip.open if path.endswith(".gz") else open
        with op(path, "rb") as f:
            block = f.read()
        for want_self in (True, False):
            a, b = Counter(), Counter()
            pa, la, sa = fast.scan_block(block, a, want_self)
            pb, lb, sb = py_scan_block(block, b, want_self)
            assert (a, pa, la) == (b, pb, lb), path
            assert set(sa) <= set(sb), path   # C: fewer candidates (by call name) ...
            from tracer.strace.lines import parse_line
            for start in set(sb) - set(sa):   # ... never one that parses as one of them
                line = parse_line(block[start:block.find(b"\n", start)].decode(
                    "utf-8", "surrogateescape"))
                assert line is None or line.kind not in ("attached",) and line.name not in (
                    "clone", "clone3", "fork", "vfork", "getpid", "tgkill") and (
                    not want_self or line.name not in ("gettid", "set_tid_address")), path


def test_find_bytes(fast):
    words = [b"", b"/x86_64-linux-gnu/", b"/aarch64-linux-gnu/", b"Process ", b"\n", b"zzz"]
    for path in LOGS[:6]:
        op = gzip.open if path.endswith(".gz") else open
        with op(path, "rb") as f:
            block = f.read()
        for data in (block, bytearray(block), block[:7], b""):
            for word in words + [bytes(data[-5:]), bytes(data[:3])]:
                assert fast.find_bytes(data, word) == bytes(data).find(word), (path, word)


def test_stale_module_is_refused(monkeypatch, tmp_path):
    (tmp_path / "strace" / "csrc").mkdir(parents=True)
    (tmp_path / "strace" / "csrc" / "module.c").write_text("/* another version */\n")
    monkeypatch.setattr(fastpath, "_PACKAGE", str(tmp_path))
    monkeypatch.setattr(fastpath, "_state", {})
    if importlib.util.find_spec("tracer.strace._fast") is None:
        assert fastpath.compiled() is None and "not built" in fastpath.status()
    else:
        assert fastpath.compiled() is None and "another version" in fastpath.status()
    monkeypatch.setenv("HANGTRACE_PURE", "1")
    monkeypatch.setattr(fastpath, "_state", {})
    assert fastpath.compiled() is None and "HANGTRACE_PURE" in fastpath.status()


_RUN = """
import json, sys
from tracer.strace.importer import import_strace
from tracer.load.trace import analyze_trace
from tracer.strace.fastpath import status
res = import_strace(sys.argv[1], sys.argv[2])
rep = analyze_trace(sys.argv[2]).to_json()
rep.pop("trace", None)
print(json.dumps({"status": status(), "report": rep, "events": res.events}))
"""


@pytest.mark.parametrize("log", [os.path.join(FIXTURES, "startup.strace.gz"),
                                 os.path.join(FIXTURES, "spin.strace.gz"),
                                 os.path.join(DATA, "stderr_f_tt_noy.log"),
                                 os.path.join(DATA, "python_f_ttt_T_yy.log"),
                                 os.path.join(DATA, "attach_pp_o_tt.log"),
                                 os.path.join(DATA, "field", "futex_self_f_k_p_term_killed.log"),
                                 os.path.join(DATA, "field", "pasted_p_sessions_old_format.log"),
                                 os.path.join(DATA, "field", "futex_self_ff_p_killed")])
def test_pure_and_compiled_paths_give_the_same_trace_and_report(tmp_path, log):
    out = {}
    for pure in ("1", "0"):
        trace = str(tmp_path / f"t{pure}.htrace")
        env = dict(os.environ, HANGTRACE_PURE=pure, PYTHONPATH=ROOT)
        r = subprocess.run([sys.executable, "-c", _RUN, log, trace], env=env,
                           capture_output=True, text=True, check=True)
        out[pure] = json.loads(r.stdout)
        out[pure]["rows"] = open(trace).read().splitlines()[1:]
    assert out["1"]["status"].startswith("pure")
    assert out["1"]["rows"] == out["0"]["rows"] and out["1"]["events"] == out["0"]["events"]
    assert out["1"]["report"] == out["0"]["report"]


def _odd_numbers(n=4000, seed=7):
    """Complete calls of a -f -ttt -T -yy log whose times and durations take every shape
    rowtext.c writes or leaves to msgspec: whole seconds, one to seven decimals, tiny and huge
    durations, times past 2**33, the writer's escapes in the arguments and in a path (raw
    control bytes, a quote)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        whole = rnd.choice([0, 1, 5, 86399, 1795953170, 8589934591, 8589934592, 9999999999])
        frac = rnd.choice(["", ".0", ".5", ".000001", ".100000", ".999999", ".1234567",
                           f".{rnd.randrange(10 ** 6):06d}"])
        dur = rnd.choice(["0.000000", "0.000001", "0.000014", "0.000274", "1.000000",
                          "0.1234567", "123456.123456", f"{rnd.random():.6f}"])
        args = rnd.choice(['3</dev/null>, "x\\ty", 1', '3<pipe:[5]>, "\\"q\\"", 4',
                           '5</a\\\\b>, 0x1, 0', 'AT_FDCWD</tmp>, "/x", O_RDONLY',
                           '6</t\tb\x01\x7f"c>, 0x1, 0'])
        name = rnd.choice(["read", "write", "close", "openat", "ioctl", "fstat", "lseek"])
        out.append(f"100 {whole}{frac} {name}({args}) = {rnd.choice([0, 1, -1])}"
                   f"{' ENOENT (No such file)' if rnd.random() < 0.2 else ''} <{dur}>")
    return out


def _decimals(n=6000, seed=13):
    """Times and durations as a log's text holds them, whose row block.c writes from their
    digits (rowtext.c row_decimal) where it can: zero to seven decimals, trailing zeros,
    leading zeros, whole parts up to and past 2**31 and 2**33."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        def number(top):
            whole = rnd.choice([0, 1, rnd.randrange(10), rnd.randrange(10 ** 6),
                                rnd.randrange(top), 2 ** 31 - 1, 2 ** 31, 2 ** 33 - 1])
            frac = "".join(rnd.choice("0123456789") for _ in range(rnd.randrange(8)))
            frac = frac + "0" * rnd.randrange(3) if rnd.random() < 0.3 else frac
            lead = "0" * rnd.randrange(3) if rnd.random() < 0.1 else ""
            return f"{lead}{whole}" + (f".{frac}" if frac else "")
        ts, dur = number(2 ** 34), number(10 ** 4)
        if "." not in dur:
            dur += ".0"
        out.append(f"100 {ts} getuid() = 0 <{dur}>")
    return out


def test_rows_written_in_c_are_msgspecs():
    """StraceConverter.rows_batch (convert_calls writing rows, csrc/rowtext.c) gives the bytes
    codec.encode_rows gives of the pure converter's events, on the real logs and on odd
    numbers."""
    from tracer.strace import batch as strace_batch
    from tracer.strace.convert import StraceConverter
    from tracer.tracefile.codec import encode_rows
    if strace_batch._CONVERT_CALLS is None:
        pytest.skip(fastpath.status())
    lines = _lines()
    batches = [lines[i:i + 3000] for i in range(0, len(lines), 3000)]
    batches += [_odd_numbers()[i:i + 500] for i in range(0, 4000, 500)]
    written = 0
    for k, batch in enumerate(batches):
        pure, fast = StraceConverter(pid_of={100: 100}.get), StraceConverter(pid_of={100: 100}.get)
        pure.feed_text(batch[0])        # a first line each: convert_calls can take the rest
        fast.feed_text(batch[0])
        events = pure.feed_batch(batch[1:])
        rows, count = fast.rows_batch(batch[1:])
        assert rows == encode_rows(events) and count == len(events), k
        written += len(events)
    assert written > 10000


def _block_of(lines, rnd):
    """The lines as a log's block: joined by newlines, the last one's sometimes missing."""
    return ("\n".join(lines) + rnd.choice(["\n", ""])).encode("utf-8", "surrogateescape")


def test_rows_read_from_a_block_are_the_lines_rows():
    """StraceConverter.rows_block (csrc/block.c convert_block: calls read from the block's
    bytes, rows written from them) gives the bytes the pure converter's events encode to
    (feed_batch of block_lines), on the real logs, odd numbers and mutated lines (non-ASCII,
    cut, carriage returns), as bytes and as the bytearray LogFile.blocks(reuse=True) gives."""
    from tracer.strace import batch as strace_batch
    from tracer.strace.batch import block_lines
    from tracer.strace.convert import StraceConverter
    from tracer.tracefile.codec import encode_rows
    if strace_batch._CONVERT_BLOCK is None:
        pytest.skip(fastpath.status())
    rnd = random.Random(11)
    lines = _lines()
    batches = [lines[i:i + 3000] for i in range(0, len(lines), 3000)]
    batches += [_odd_numbers()[i:i + 500] for i in range(0, 4000, 500)]
    batches += [_decimals()[i:i + 500] for i in range(0, 6000, 500)]
    odd = _mutations(lines, 6000, seed=9)
    batches += [odd[i:i + 300] for i in range(0, len(odd), 300)]
    written = 0
    for k, batch in enumerate(batches):
        block = _block_of(batch[1:], rnd)
        for data in (block, bytearray(block)):
            pure, fast = (StraceConverter(pid_of={100: 100, 2: 2}.get) for _ in range(2))
            pure.feed_text(batch[0])    # a first line each: convert_block can take the rest
            fast.feed_text(batch[0])
            events = pure.feed_batch(block_lines(block)) + pure.finish()
            rows, count = fast.rows_block(data)
            last = fast.finish()
            assert bytes(rows) + encode_rows(last) == encode_rows(events), k
            assert count + len(last) == len(events) and fast.lines == pure.lines, k
        written += len(events)
    assert written > 10000


def test_row_buffer_holds_still_while_viewed(fast):
    """RowBuffer (csrc/rowbuf.c): bytes-like rows kept from use to use; nothing changes them
    while a view of them is held (add, clear, convert_block raise BufferError)."""
    from tracer.strace.convert import StraceConverter
    from tracer.tracefile.codec import encode_row
    if hasattr(fast.RowBuffer, "tobytes"):
        pytest.skip("built for 3.10's limited API: test_row_buffer_as_bytes_where_not_bytes_like")
    buf = fast.RowBuffer()
    buf.add(b"")                    # (nothing to a buffer with no memory yet)
    assert len(buf) == 0 and bytes(buf) == b""
    buf.add(b"ab")
    buf.add(bytearray(b"c"))
    assert bytes(buf) == b"abc" and len(buf) == 3
    conv = StraceConverter(pid_of={1: 1}.get)
    conv.feed_text("1 1795953170.000001 getpid() = 1 <0.000001>")
    line = b"1 1795953170.000002 getuid() = 0 <0.000001>\n"
    with memoryview(buf) as view:
        assert view.readonly and view.tobytes() == b"abc"
        for change in (lambda: buf.add(b"x"), buf.clear,
                       lambda: conv._run_c(fast.convert_block, line, 0, buf, encode_row)):
            with pytest.raises(BufferError):
                change()
    assert bytes(buf) == b"abc"
    assert conv._run_c(fast.convert_block, line, 0, buf, encode_row) == (len(line), 1)
    assert bytes(buf).startswith(b'abc["sc",1795953170.000002,1,1,"getuid","",0,null,1e-6')
    buf.clear()
    assert len(buf) == 0 and bytes(buf) == b""


def test_row_buffer_as_bytes_where_not_bytes_like(fast):
    """RowBuffer built for CPython 3.10's limited API (setup.py HANGTRACE_ABI3: no type exports
    a buffer there): its rows are read as bytes, tobytes(), a copy that no later change of
    the buffer (add, clear, convert_block) alters."""
    from tracer.strace.convert import StraceConverter
    from tracer.tracefile.codec import encode_row
    if not hasattr(fast.RowBuffer, "tobytes"):
        pytest.skip("a bytes-like RowBuffer: test_row_buffer_holds_still_while_viewed")
    buf = fast.RowBuffer()
    buf.add(b"")
    assert len(buf) == 0 and buf.tobytes() == b""
    buf.add(b"ab")
    buf.add(bytearray(b"c"))
    rows = buf.tobytes()
    assert rows == b"abc" and len(buf) == 3
    conv = StraceConverter(pid_of={1: 1}.get)
    conv.feed_text("1 1795953170.000001 getpid() = 1 <0.000001>")
    line = b"1 1795953170.000002 getuid() = 0 <0.000001>\n"
    assert conv._run_c(fast.convert_block, line, 0, buf, encode_row) == (len(line), 1)
    assert rows == b"abc"
    assert buf.tobytes().startswith(b'abc["sc",1795953170.000002,1,1,"getuid","",0,null,1e-6')
    buf.clear()
    assert len(buf) == 0 and buf.tobytes() == b"" and rows == b"abc"
