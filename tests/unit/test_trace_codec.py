"""The trace codec (tracer/tracefile/codec.py, msgspec): what it reads and refuses, a table of
real and odd rows; every event of real recordings written and read back equal; a block read
at once equals the same lines read one by one; rows written by another field order read by
name; strings that are not UTF-8 kept."""
import gzip
import json
import os

import pytest

from tracer import events as ev
from tracer.strace.importer import import_strace
from tracer.tracefile.codec import BAD, RowCodec, encode_row, encode_rows
from tracer.tracefile.format import TraceReader

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
FIXTURES = os.path.join(HERE, "..", "fixtures", "gpu-h200")
CODEC = RowCodec(ev.schema())

SC = '["sc",1.0,1,1,"x","",0,null,null,null,null,null,false]'

# (line, what it must read as: an event's repr, or BAD)
TABLE = [
    (SC, "Syscall(ts=1.0, pid=1, tid=1, name='x', args='', ret=0, err=None, dur=None, fd=None, "
         "fd_kind=None, fd_target=None, ongoing=False)"),
    ('["sc",1.0,1,1,"a\\u00e9\\ud83d\\ude00\\"\\\\\\/\\b\\f\\n\\r\\t","",0,null,1e-05,null,'
     'null,null,false]', "Syscall(ts=1.0, pid=1, tid=1, name='aé\U0001f600\"\\\\/\\x08\\x0c"
                         "\\n\\r\\t', args='', ret=0, err=None, dur=1e-05, fd=None, "
                         "fd_kind=None, fd_target=None, ongoing=False)"),
    ('["sc",1,1,1,"x","",-0,null,1.5E+3,null,null,null,true]',      # an int where a float goes
     "Syscall(ts=1.0, pid=1, tid=1, name='x', args='', ret=0, err=None, dur=1500.0, fd=None, "
     "fd_kind=None, fd_target=None, ongoing=True)"),
    # trailing fields that have defaults may be left out (an array-like Struct's rule)
    ('["sc",1.0,1,1,"x","",0,null,null,null,null,null]',
     "Syscall(ts=1.0, pid=1, tid=1, name='x', args='', ret=0, err=None, dur=None, fd=None, "
     "fd_kind=None, fd_target=None, ongoing=False)"),
    ('["sc", 1.0,1,1,"x","",0,null,null,null,null,null,false]',        # JSON's whitespace
     "Syscall(ts=1.0, pid=1, tid=1, name='x', args='', ret=0, err=None, dur=None, fd=None, "
     "fd_kind=None, fd_target=None, ongoing=False)"),
    ('["pl",1.0,1,2,"poll","",0,null,0.1,null,null,null,false,0.1,1,["a","b"],true]',
     "PollCall(ts=1.0, pid=1, tid=2, name='poll', args='', ret=0, err=None, dur=0.1, fd=None, "
     "fd_kind=None, fd_target=None, ongoing=False, timeout=0.1, nfds=1, fd_kinds=('a', 'b'), "
     "timed_out=True)"),
    ('["pi",1.0,5,1,"x",["a"],{"3":"t"},[[1,"pipe","pipe:[3]","w",0,null],[2,null,"?","r"]],'
     '[],"",null,null,null,false,false]',
     "ProcessInfo(ts=1.0, pid=5, ppid=1, comm='x', cmdline=['a'], threads={3: 't'}, "
     "fds=[FdInfo(fd=1, kind='pipe', target='pipe:[3]', mode='w', pos=0, inode=None), "
     "FdInfo(fd=2, kind=None, target='?', mode='r', pos=None, inode=None)], listening=[], "
     "state='', exit_code=None, start_time=None, environ_rank=None, pid_unknown=False, "
     "threads_partial=False, ns_pids=[])"),      # a row written before ns_pids: []
    ('["end",1.0,"complete",0.0,1]',
     "RecordingEnd(ts=1.0, reason='complete', duration=0.0, events=1, window_end=None)"),
    # refused: wrong types, wrong lengths, what JSON cannot hold, no row at all
    ('["pl",1.0,1,2,"poll","",0,null,0.1,null,null,null,false,0.1,1,null,true]', BAD),
    ('["pl",1.0,1,2,"poll","",0,null,0.1,null,null,null,false,0.1,1,[1],true]', BAD),
    ('["sc",1.0,1,1,"x\x01","",0,null,null,null,null,null,false]', BAD),     # a raw control
    ('["sc",1.0,1,1,"x","",01,null,null,null,null,null,false]', BAD),
    ('["sc",1.0,1,1]', BAD),                                                     # no name
    ('["sc",1.0,1]', BAD),                                                       # no tid
    ('["sc",1.0,1,1,"x","",0,null,null,null,null,null,false,1]', BAD),         # one too many
    ('["sc","1.0",1,1,"x","",0,null,null,null,null,null,false]', BAD),
    ('["sc",1.0,true,1,"x","",0,null,null,null,null,null,false]', BAD),        # a bool: no int
    ('["sc",1e999,1,1,"x","",0,null,null,null,null,null,false]', BAD),
    ('["sc",NaN,1,1,"x","",0,null,null,null,null,null,false]', BAD),
    ('["sc",Infinity,1,1,"x","",0,null,null,null,null,null,false]', BAD),
    ('["sc",1.0,1,1,"x","",0,null,null,null,null,null,0]', BAD),
    ('["sc",1.0,1.5,1,"x","",0,null,null,null,null,null,false]', BAD),
    ('["sc",1.0,1,1,["x"],"",0,null,null,null,null,null,false]', BAD),
    ('["gpu",1.0,0,"x",null,null,null,null,null,null,[1,"2"]]', BAD),
    ('["pi",1.0,5,1,"x",[],{"3a":"t"},[],[],"",null,null,null,false,false]', BAD),  # a tid key
    ('["pi",1.0,5,1,"x",[],{},[[1,"pipe"]],[],"",null,null,null,false,false]', BAD),  # short fd
    ('{"sc":1}', BAD), ('["zz",1]', BAD), ('[', BAD), ('', BAD), ('garbage', BAD),
    ('[' * 100000 + ']' * 100000, BAD),                                     # deep nesting
    ('["klog",1.0,"k",null,[[' + '[' * 5000 + ']' * 5000 + ']],0,""]', BAD),
]


@pytest.mark.parametrize("line,want", TABLE, ids=[str(i) for i in range(len(TABLE))])
def test_table(line, want):
    got = CODEC.line(line.encode("utf-8", "surrogateescape"))
    if want is BAD:
        assert got is BAD, got
    else:
        assert repr(got) == want
        # what is read is written back to a line that reads the same
        assert repr(CODEC.line(encode_row(got)[:-1])) == want


def test_a_block_reads_as_its_lines():
    lines = [t for t, _ in TABLE if "\n" not in t]
    good = [t for t, want in TABLE if want is not BAD and not t.startswith('["end"')]
    data = ("\n".join(good) + "\n").encode()
    items, by_line = CODEC.block(data)
    assert not by_line and [repr(x) for x in items] == [repr(CODEC.line(t.encode()))
                                                         for t in good]
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
    items, by_line = CODEC.block(data)
    assert by_line
    assert [repr(x) for x in items] == [repr(CODEC.line(t.encode("utf-8", "surrogateescape")))
                                        for t in lines]
    # JSON's whitespace as it comes: a blank line is no row, a row cut where JSON allows a
    # newline is one row (read one by one, each half is BAD)
    one = CODEC.line(SC.encode())
    assert CODEC.block((SC + "\n\n" + SC + "\n").encode()) == ([one, one], False)
    assert CODEC.block((SC[:9] + "\n" + SC[9:] + "\n").encode()) == ([one], False)
    assert CODEC.line(SC[:9].encode()) is BAD and CODEC.line(SC[9:].encode()) is BAD


def _recorded(tmp_path):
    evs = []
    for i, name in enumerate(sorted(os.listdir(FIXTURES))):
        if name.endswith(".strace.gz"):
            out = str(tmp_path / f"{i}.htrace")
            import_strace(os.path.join(FIXTURES, name), out)
            evs.extend(TraceReader(out).events())
    return evs


def test_real_events_round_trip(tmp_path):
    evs = _recorded(tmp_path)
    assert len(evs) > 10000 and len({type(e) for e in evs}) >= 6
    data = encode_rows(evs)
    assert data == b"".join(encode_row(e) for e in evs)
    items, by_line = CODEC.block(data)
    assert not by_line and items == evs
    # the text is JSON a reader without msgspec takes: the row of event_to_row
    for line, e in zip(data.splitlines()[:2000], evs):
        assert json.loads(line) == ev.event_to_row(e)


def test_strings_that_are_not_utf8_are_kept():
    e = ev.Syscall(1.0, 1, 1, "open", 'x\udc80\udcff', 3, fd_target="/tmp/\udce9")
    line = encode_row(e)
    assert line.isascii() and b"\\udc80" in line
    assert CODEC.line(line[:-1]) == e
    # in a block with others: read line by line, the same events
    items, _ = CODEC.block(encode_rows([e, ev.ThreadExit(2.0, 1, 1), e]))
    assert items == [e, ev.ThreadExit(2.0, 1, 1), e]
    # non-UTF-8 bytes in a line (a trace edited by hand): read as surrogates
    raw = SC.replace('"x"', '"x\xe9"').encode("latin-1")
    assert CODEC.line(raw).name == "x\udce9"


def test_another_field_order_reads_by_name():
    names = ["tid", "pid", "ts", "new_field", "name", "args", "ret", "err", "dur", "fd",
             "fd_kind", "fd_target", "ongoing"]
    codec = RowCodec({"sc": names, "tx": ev.field_names(ev.ThreadExit)})
    row = b'["sc",7,3,2.5,{"any":"thing"},"read","",0,null,null,null,null,null,false]'
    e = codec.line(row)
    assert (e.ts, e.pid, e.tid, e.name) == (2.5, 3, 7, "read")
    items, by_line = codec.block(row + b"\n" + encode_row(ev.ThreadExit(3.0, 3, 7)))
    assert not by_line and items[0] == e and items[1] == ev.ThreadExit(3.0, 3, 7)
    # a known field with a wrong type, or a required one missing: BAD
    assert codec.line(row.replace(b'"read"', b"5")) is BAD
    short = RowCodec({"sc": ["ts", "pid", "name"]})
    assert short.line(b'["sc",1.0,3,"x"]') is BAD            # no tid


def test_a_schema_without_known_tags_reads_nothing():
    for schema in ({}, {"zz": ["ts"]}, {"end": ev.field_names(ev.RecordingEnd)}):
        codec = RowCodec(schema)
        items, by_line = codec.block((SC + "\n" + SC + "\n").encode())
        assert by_line and items == [BAD, BAD]
        assert codec.row(json.loads(SC)) is BAD
    only_end = RowCodec({"end": ev.field_names(ev.RecordingEnd)})
    assert only_end.block(b'["end",1.0,"complete",0.0,1]\n')[0] == [
        ev.RecordingEnd(1.0, "complete", 0.0, 1)]


def test_parsed_rows_are_checked_as_lines():
    assert CODEC.row(json.loads(SC)) == CODEC.line(SC.encode())
    assert CODEC.row(["sc", float("nan"), 1, 1, "x", "", 0, None, None, None, None, None,
                      False]) is BAD
    assert CODEC.row(["sc", 1.0, 1, 1, "x", "", 0, None, float("inf"), None, None, None,
                      False]) is BAD                          # not "duration unknown"
    assert CODEC.row({"not": "a row"}) is BAD
    assert CODEC.row(["sc", 1.0, 1, 1, "x\udc80", "", 0, None, None, None, None, None,
                      False]).name == "x\udc80"


def test_reader_counts_bad_lines_as_before(tmp_path):
    """A bad line inside the trace is corruption (counted), one at its end a cut-off write."""
    from tracer.tracefile.format import TraceWriter, make_header
    path = str(tmp_path / "t.htrace.gz")
    with TraceWriter(path, make_header(backends=["test"], source="attach", targets=[1],
                                       start=1.0, processes=[])) as w:
        w.write(ev.ThreadExit(1.0, 1, 1))
    with gzip.open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    body = lines[:2] + [b"garbage\n", lines[1], b'["sc",1.0\n']
    bad = str(tmp_path / "bad.htrace")
    with open(bad, "wb") as f:
        f.writelines(body)
    r = TraceReader(bad)
    got = list(r.events())
    assert len(got) == 2 and r.info.bad_lines == 1 and r.info.truncated
    assert r.info.end is None
