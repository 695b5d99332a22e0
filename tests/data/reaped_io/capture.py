"""Captures tests/data/reaped_io/chain.json: /proc/PID/io and stat of a subreaper R and its
children, read at six steps (Linux 6.18, 2-core VM). A chain: R -> L -> H; H writes 10,000 B
to /dev/null and exits, L reaps it, L exits, R reaps it. An orphan: R -> L2 -> H2; L2 exits (R
reaps it), H2 (now R's) writes 5,000 B and exits, R reaps it. Run: python3 capture.py > chain.json
"""
import ctypes, json, os, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
def rd(p):
    try:
        with open(p, 'rb') as f: return f.read().decode()
    except OSError: return None
out = []
def snap(step, *pids):
    for pid in pids:
        out.append({"step": step, "pid": pid, "io": rd(f"/proc/{pid}/io"), "stat": rd(f"/proc/{pid}/stat")})
def writer(n):
    fd = os.open("/dev/null", os.O_WRONLY)
    for _ in range(n): os.write(fd, b"x" * 1000)
R = os.getpid()
go_r, go_w = os.pipe(); ok_r, ok_w = os.pipe()
L = os.fork()
if L == 0:
    H = os.fork()
    if H == 0:
        writer(10); os.write(ok_w, b"%d\n" % os.getpid()); os.read(go_r, 1); os._exit(0)
    os.read(go_r, 1)          # second go: reap H
    os.waitpid(H, 0); os.write(ok_w, b"r")
    os.read(go_r, 1); os._exit(0)
H = int(os.read(ok_r, 64))
snap("1 all alive, H wrote", R, L, H)
os.write(go_w, b"gg")          # H exits, L reaps it
os.read(ok_r, 1); time.sleep(0.05)
snap("2 L reaped H", R, L, H)
os.write(go_w, b"g"); os.waitpid(L, 0)
snap("3 R reaped L", R, L)
# orphan
L2 = os.fork()
if L2 == 0:
    H2 = os.fork()
    if H2 == 0:
        os.write(ok_w, b"%d\n" % os.getpid())
        while os.getppid() != R: time.sleep(0.01)
        writer(5); os.write(ok_w, b"w"); os.read(go_r, 1); os._exit(0)
    os.read(go_r, 1); os._exit(0)
H2 = int(os.read(ok_r, 64))
snap("4 L2 and H2 alive", R, L2, H2)
os.write(go_w, b"g"); os.waitpid(L2, 0)
os.read(ok_r, 1)
snap("5 R reaped L2, H2 is R's and wrote", R, L2, H2)
os.write(go_w, b"g"); os.waitpid(H2, 0)
snap("6 R reaped H2", R, H2)
json.dump(out, sys.stdout, indent=0)
