#!/usr/bin/env python3
"""Programs for the watch tests (tests/live/test_watch_recordings.py): each prints ``READY <pid>`` on
stdout, then behaves as its mode says until killed. Standard library only.

Modes (with --log FILE each "LOG" line also goes to FILE, opened for appending, as "step N:
LOG <epoch> ...": a log whose lines watch can read, where a counter advances; stdout alone is a
pipe whose content watch cannot read, and a line a second there is no more than a stats line's
timer makes: progress/reports.py):
  logs-then-blocks  logs "LOG <epoch>" to stdout every 0.1 s for --log-for seconds, then
                    blocks forever on a lock it already holds (one thread: a deadlock).
  chatter           logs like the above for --log-for seconds, then only chatters: an eventfd
                    poke every 0.5 s and a 24-byte heartbeat a second to a TCP peer (a thread
                    of its own, over loopback): keep-alives, never progress.
  keeps-logging     a log line every second, and an eventfd poke every 0.5 s, forever.
  streams           sends 32 KiB every 0.4 s with send(2) on a loopback TCP connection to a
                    thread of its own that reads it: no write(2) at all, only bytes sent.
  accepts           listens on a loopback port; a child process connects every 0.5 s and
                    waits for the end of the stream; the parent accepts and closes at once,
                    sending nothing and writing nothing: connections served, nothing else.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time


LOG_FD = None
STEP = [0]


def log(text: str) -> None:
    """``text`` to stdout and, with --log, as the next step to the log file."""
    print(text, flush=True)
    if LOG_FD is not None:
        STEP[0] += 1
        os.write(LOG_FD, f"step {STEP[0]}: {text}\n".encode())


def log_for(seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        log(f"LOG {time.time():.6f}")
        time.sleep(0.1)


def poke_forever(every: float) -> None:
    efd = os.eventfd(0)
    while True:
        os.eventfd_write(efd, 1)
        os.eventfd_read(efd)
        time.sleep(every)


def tcp_pair() -> tuple:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    a = socket.create_connection(srv.getsockname())
    b, _ = srv.accept()
    srv.close()
    return a, b


def sink(s: socket.socket) -> None:
    while s.recv(1 << 16):
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("--log-for", type=float, default=3.0)
    ap.add_argument("--log", help="also append the LOG lines to this file")
    ns = ap.parse_args()
    global LOG_FD
    if ns.log:
        LOG_FD = os.open(ns.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    if ns.mode == "accepts":
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)
        port = srv.getsockname()[1]
        if os.fork() == 0:
            srv.close()
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port)) as c:
                        c.recv(1)            # the server closes first
                except OSError:
                    pass
                time.sleep(0.5)
        print("READY", os.getpid(), flush=True)
        while True:
            conn, _ = srv.accept()
            conn.close()
    print("READY", os.getpid(), flush=True)
    if ns.mode == "logs-then-blocks":
        log_for(ns.log_for)
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()               # never returns
    elif ns.mode == "chatter":
        a, b = tcp_pair()
        threading.Thread(target=sink, args=(b,), daemon=True).start()
        threading.Thread(target=poke_forever, args=(0.5,), daemon=True).start()
        log_for(ns.log_for)
        while True:
            a.send(b"PING keepalive 0123456\n")          # 24 bytes
            time.sleep(1.0)
    elif ns.mode == "keeps-logging":
        threading.Thread(target=poke_forever, args=(0.5,), daemon=True).start()
        while True:
            log(f"LOG {time.time():.6f} still working")
            time.sleep(1.0)
    elif ns.mode == "streams":
        a, b = tcp_pair()
        threading.Thread(target=sink, args=(b,), daemon=True).start()
        chunk = b"x" * 32768
        while True:
            a.sendall(chunk)
            time.sleep(0.4)
    else:
        sys.exit(f"unknown mode {ns.mode}")


if __name__ == "__main__":
    main()
