"""A process in every blocking state hangtrace decodes; used by capture.py and the live tests.

Threads (comm set with prctl): locked (futex, no timeout), timedlock (futex with timeout),
poller (poll 5000 ms), epoller (epoll_wait, no timeout), reader (read on a pipe), sleeper
(clock_nanosleep), acceptor (accept on a TCP listener). The main thread waits in wait4 for a
child named "a) b\\n(c" that reads its stdin forever; a second child is killed and left a zombie.
Prints one JSON line with the pids, tids and ports, then stays until killed.
"""
import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)
tids = {}


def named(name, fn):
    def run():
        libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
        tids[name] = threading.get_native_id()
        fn()
    threading.Thread(target=run, daemon=True).start()


held = threading.Lock()
held.acquire()
pipe_r, pipe_w = os.pipe()
poll_r, _poll_w = os.pipe()
tcp = socket.socket()
tcp.bind(("127.0.0.1", 0))
tcp.listen()
unix_path = sys.argv[1] if len(sys.argv) > 1 else f"/tmp/hangtrace-scenario-{os.getpid()}.sock"
unix = socket.socket(socket.AF_UNIX)
unix.bind(unix_path)
unix.listen()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
ep = select.epoll()
ep.register(poll_r, select.EPOLLIN)
poller = select.poll()
poller.register(poll_r, select.POLLIN)

named("locked", held.acquire)
named("timedlock", lambda: held.acquire(timeout=600))
named("poller", lambda: [poller.poll(5000) for _ in iter(int, 1)])
named("epoller", lambda: ep.poll(-1))
named("reader", lambda: os.read(pipe_r, 1))
named("sleeper", lambda: time.sleep(600))
named("acceptor", tcp.accept)

odd = subprocess.Popen([sys.executable, "-c",
                        "import ctypes,sys; ctypes.CDLL(None).prctl(15, b'a) b\\n(c', 0, 0, 0);"
                        "print('ok', flush=True); sys.stdin.read()", "", "x y", ""],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
odd.stdout.readline()
zombie = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
os.kill(zombie.pid, signal.SIGKILL)
while len(tids) < 7:
    time.sleep(0.01)
print(json.dumps({"pid": os.getpid(), "tids": tids, "odd": odd.pid, "zombie": zombie.pid,
                  "tcp_port": tcp.getsockname()[1], "udp_port": udp.getsockname()[1],
                  "unix_path": unix_path}), flush=True)
os.waitpid(odd.pid, 0)  # wait4(odd), no timeout, until the test kills everything
