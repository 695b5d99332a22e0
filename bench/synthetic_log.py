"""A generated ``strace -f -ttt -T -yy`` log of an LLM server worker (short, regular lines).

``generate(path, n_lines, seed)``: a main thread writing logs and issuing NVIDIA ioctls, a
CUDA event-handler thread polling /dev/nvidia0 fds with a 100 ms timeout, an asyncio thread in
epoll_wait on TCP sockets, worker threads in futex waits (many as unfinished/resumed pairs),
socket reads, and a few threads parked forever. Easier than real logs (import_speed.py uses
real lines); kept for the sharded-import tests and ``import_speed.py --synthetic``.
"""
from __future__ import annotations

import random

POLL_FDS = ", ".join(
    ["{fd=16<anon_inode:[eventfd]>, events=POLLIN}"]
    + [f"{{fd={n}</dev/nvidia0<char 195:0>>, events=POLLIN}}" for n in (18, 20, 22, 24)]
    + ["{fd=34<pipe:[7964]>, events=POLLIN}"])


def generate(path: str, n_lines: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    ts = 1795950000.0
    main, evt, aio = 1000, 1017, 1020
    workers = list(range(1001, 1017))
    parked = workers[8:]
    pending: dict = {}
    out = []
    with open(path, "w") as f:
        # threads parked in futex for the whole recording
        for t in parked:
            f.write(f"{t:<5} {ts:.6f} futex(0x7f19275f{t:04x}, FUTEX_WAIT_BITSET_PRIVATE|"
                    f"FUTEX_CLOCK_REALTIME, 0, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>\n")
        written = len(parked)
        while written < n_lines:
            ts += rnd.random() * 0.0002
            r = rnd.random()
            d = rnd.random() * 0.0001
            if r < 0.25:
                out.append(f"{main:<5} {ts:.6f} write(1</srv/out/server.log>, \"step 3900 loss "
                           f"0.25\\n\", 21) = 21 <{d:.6f}>")
            elif r < 0.40:
                out.append(f"{main:<5} {ts:.6f} ioctl(8</dev/nvidiactl<char 195:255>>, _IOC("
                           f"_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), 0x7ffed3135b90) = 0 <{d:.6f}>")
            elif r < 0.55:
                if evt in pending:
                    del pending[evt]
                    out.append(f"{evt:<5} {ts:.6f} <... poll resumed>) = 0 (Timeout) <0.100{rnd.randint(100, 999)}>")
                elif rnd.random() < 0.5:
                    pending[evt] = True
                    out.append(f"{evt:<5} {ts:.6f} poll([{POLL_FDS}], 6, 100 <unfinished ...>")
                else:
                    out.append(f"{evt:<5} {ts:.6f} poll([{POLL_FDS}], 6, 100) = 0 (Timeout) <0.100{rnd.randint(100, 999)}>")
            elif r < 0.68:
                t = rnd.choice(workers[:8])
                if t in pending:
                    del pending[t]
                    out.append(f"{t:<5} {ts:.6f} <... futex resumed>) = 0 <{d * 50:.6f}>")
                else:
                    pending[t] = True
                    out.append(f"{t:<5} {ts:.6f} futex(0x55d0c0a{t:04x}, FUTEX_WAIT_PRIVATE, 2, "
                               f"NULL <unfinished ...>")
            elif r < 0.76:
                t = rnd.choice(workers[:8])
                out.append(f"{t:<5} {ts:.6f} futex(0x55d0c0a{t:04x}, FUTEX_WAKE_PRIVATE, 1) = 1 <{d:.6f}>")
            elif r < 0.86:
                if aio in pending:
                    del pending[aio]
                    out.append(f"{aio:<5} {ts:.6f} <... epoll_wait resumed>[{{events=EPOLLIN, "
                               f"data={{u32=12, u64=12}}}}], 1024, 50) = 1 <{d * 10:.6f}>")
                else:
                    pending[aio] = True
                    out.append(f"{aio:<5} {ts:.6f} epoll_wait(6<anon_inode:[eventpoll]>,  <unfinished ...>")
            elif r < 0.95:
                out.append(f"{aio:<5} {ts:.6f} recvfrom(12<TCP:[127.0.0.1:8000->127.0.0.1:47550]>, "
                           f"\"GET /health HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n\", 65536, 0, NULL, NULL) = 38 <{d:.6f}>")
            else:
                out.append(f"{aio:<5} {ts:.6f} sendto(12<TCP:[127.0.0.1:8000->127.0.0.1:47550]>, "
                           f"\"HTTP/1.1 200 OK\\r\\n\"..., 120, 0, NULL, 0) = 120 <{d:.6f}>")
            written += 1
            if len(out) >= 10000:
                f.write("\n".join(out) + "\n")
                out.clear()
        if out:
            f.write("\n".join(out) + "\n")
