"""Logs pasted at a hang, judged by the call each thread was in when the log was cut (issue 32's
ground, issue 30's verdicts): shapes of real logs from public issue trackers, rewritten with
made-up pids and addresses.

- A wait owed from outside the log (a file lock whose holder the log does not show, a connect a
  peer does not answer) is blocked, not idle, its process's verdict as the tree's; a tree whose
  other chains advance still progresses.
- A log without times that ends with a thread in a call without a time limit: the end decides,
  and what the thread wrote before is history; a line cut in a call that cannot block is not a
  wait.
- A thread waiting for a contended mutex (FUTEX_WAIT on 2) is not idle because its process's
  other threads wait for input: a lock's holder does not release it by waiting.
"""
from __future__ import annotations

from pathlib import Path

from tracer.load.trace import analyze_trace
from tracer.strace.importer import import_strace


def _judge(tmp_path: Path, text: str):
    log = tmp_path / "hang.log"
    log.write_text(text)
    import_strace(str(log), str(tmp_path / "t.htrace.gz"))
    return analyze_trace(str(tmp_path / "t.htrace.gz"))


# systemd-repart on a block device: reads, then flock() that never returns (`strace repart`)
FLOCK = """\
openat(AT_FDCWD, "/dev/sdb", O_RDONLY|O_CLOEXEC) = 3
fstat(3, {st_mode=S_IFBLK|0660, st_rdev=makedev(0x8, 0x10), ...}) = 0
read(3, "\\353c\\220\\20\\216\\320\\274\\0\\260\\270\\0\\0"..., 4096) = 4096
lseek(3, 0, SEEK_SET) = 0
ioctl(3, BLKGETSIZE64, [8589934592]) = 0
read(3, "EFI PART\\0\\0\\1\\0\\\\\\0\\0\\0"..., 4096) = 4096
write(2, "Sizing device...\\n", 17) = 17
flock(3, LOCK_EX"""

# a daemon connecting to its database at start-up; the connect never completes
CONNECT = """\
socket(AF_INET, SOCK_STREAM, IPPROTO_TCP) = 7
setsockopt(7, SOL_TCP, TCP_NODELAY, [1], 4) = 0
connect(7, {sa_family=AF_INET, sin_port=htons(3306), sin_addr=inet_addr("10.0.0.5")}, 16"""

# `strace -f -p` of an MPI test: every thread in its call, none returned
MUTEX = """\
[pid  7007] epoll_wait(20,  <unfinished ...>
[pid  7005] futex(0x7f0000000878, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>
[pid  7004] futex(0x7f0000000878, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>
[pid  7002] accept4(9,  <unfinished ...>
[pid  7001] futex(0x7f0000001090, FUTEX_WAIT_PRIVATE, 2, NULL <unfinished ...>
[pid  7006] epoll_wait(20,  <unfinished ...>
"""


def test_a_lock_whose_holder_the_log_does_not_show_is_blocked(tmp_path):
    r = _judge(tmp_path, FLOCK)
    assert r.verdict == "blocked", (r.verdict, r.rule)
    assert "waits for a lock on /dev/sdb; its holder is unknown" in r.root_cause["summary"]


def test_a_connect_that_never_completes_is_blocked(tmp_path):
    r = _judge(tmp_path, CONNECT)
    assert r.verdict == "blocked", (r.verdict, r.rule)


def test_the_process_waiting_for_what_is_owed_says_blocked_as_its_tree_does(tmp_path):
    # its process's own verdict agreed with the tree's (it said idle under a blocked tree)
    for text in (FLOCK, CONNECT):
        (p,) = _judge(tmp_path, text).processes
        assert (p.verdict, p.rule) == ("blocked", "waits-outside")
        # the log names no process: its thread is "the traced thread", never a thread 0
        assert p.evidence[0].startswith("the traced thread: waits "), p.evidence
    # a read from a source the log does not name is input: idle, process and tree
    r = _judge(tmp_path, "read(0, ")
    assert r.verdict == "idle" and [p.verdict for p in r.processes] == ["idle"]


def test_the_end_decides_what_was_written_before_is_history(tmp_path):
    # the thread logged a line, then waits on a futex for ever: not progressing
    r = _judge(tmp_path, 'write(2, "worker started\\n", 15) = 15\n'
               'openat(AT_FDCWD, "/etc/hosts", O_RDONLY) = 3\nread(3, "127.0.0.1 lo"..., 4096)'
               ' = 12\nclose(3) = 0\nfutex(0x55d0, FUTEX_WAIT_PRIVATE, 0, NULL')
    assert r.verdict in ("blocked", "deadlocked"), (r.verdict, r.rule)   # one thread: nobody wakes it
    # a line cut in a call that cannot block (mmap) leaves the thread's work as it was
    r = _judge(tmp_path, 'write(3, "[2011-06-09 04:16:07] WARNING job done"..., 82) = 82\n'
               'open("/srv/app/bin/manage.py", O_RDONLY) = 14\nfstat(14, {st_mode=S_IFREG|0755,'
               ' st_size=166, ...}) = 0\nmmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_PRI')
    assert r.verdict == "progressing", (r.verdict, r.rule)


def test_a_contended_mutex_is_no_idle_process(tmp_path):
    r = _judge(tmp_path, MUTEX)
    assert r.verdict == "blocked", (r.verdict, r.rule)
    assert (r.root_cause["pid"], r.root_cause["tid"]) == (7001, 7001)
