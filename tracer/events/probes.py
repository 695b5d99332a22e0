"""Events the end-of-recording probes and the proc backend's socket reader produce (a part of the
event model, re-exported by tracer.events): futex owners, unix socket peers, NCCL RAS answers,
TCP socket counters, file locks. Plain data, never what it means."""
from __future__ import annotations

from typing import Dict, List, Optional

from msgspec import field

from . import Event
from .shapes import Int


# --------------------------------------------------------------------------- end-of-recording probes
class FutexOwner(Event, tag="fxo"):
    """Who holds the futex a thread of ``pid`` waits on, read from the target's memory at the end
    of the recording (tracer/record/probes/futex_owner.py).

    ``word`` is the 32-bit futex word at ``addr`` (None when the memory could not be read);
    ``owner_tid`` the thread that holds it where that can be known, else None. ``kind`` says how
    the word was read: "mutex" (a glibc pthread mutex: owner from its ``__owner`` field),
    "pi-mutex" (owner tid in the word itself), "join" (pthread_join: the word is the tid of the
    thread being joined, which holds it until it exits), "unknown" (a semaphore, condition or
    other futex: no owner is recorded). ``owner_pid`` is the process of ``owner_tid`` at the
    time of the probe, None when that thread no longer exists. ``shared`` is a futex without
    FUTEX_PRIVATE_FLAG (possibly in memory shared between processes). ``waiters`` are the tids
    of ``pid`` seen waiting on it.
    """
    pid: Int
    addr: Int
    word: Optional[Int] = None
    owner_tid: Optional[Int] = None
    kind: str = "unknown"
    owner_pid: Optional[Int] = None
    shared: bool = False
    waiters: List[Int] = field(default_factory=list)
    why: str = ""


class SocketPeers(Event, tag="skp"):
    """The socket at the other end of each connected unix socket of ``pid`` (sock_diag).

    ``peers`` maps an inode of one of its sockets to the peer socket's inode (JSON turns the keys
    into strings: readers convert them back with int). ``outside`` maps a peer inode that no
    traced process holds to the pids (outside the tree) that hold it; a peer inode in neither
    belongs to a socket whose last holder closed it or exited."""
    pid: Int
    peers: Dict[Int, Int] = field(default_factory=dict)
    outside: Dict[Int, List[Int]] = field(default_factory=dict)


class NcclRasStatus(Event, tag="ras"):
    """What NCCL's RAS service answered to ``VERBOSE STATUS`` at the end of a recording
    (record/probes/nccl_ras.py): the raw answer in ``fmt`` ("json" or "text"), parsed by
    analysis/job/nccl_ras.py. ``pid`` listens on ``host:port``; ``error`` says why there is no
    answer (refused, timed out)."""
    pid: Int
    host: str = ""
    port: Int = 0
    fmt: str = "json"
    text: str = ""
    error: str = ""


class SocketCounters(Event, tag="skc"):
    """The kernel's own counters of one TCP socket of ``pid`` (inet_diag's tcp_info, read by the
    proc backend: linux/tcpdiag.py): bytes and data segments sent and received since the socket
    was created, whatever call moved them. None where the kernel does not keep the counter."""
    pid: Int
    fd: Int
    target: str = ""
    bytes_sent: Optional[Int] = None
    bytes_received: Optional[Int] = None
    segs_out: Optional[Int] = None
    segs_in: Optional[Int] = None


class FileLock(Event, tag="flk"):
    """One line of /proc/locks at the end of a recording (record/probes/file_locks.py): a file
    lock ``pid`` holds, or waits for when ``waiting`` (the kernel's "->" lines), on the file
    ``inode`` of device ``dev`` ("fe:00"). ``kind`` FLOCK, POSIX or OFDLCK (an OFD lock shows pid
    -1), ``access`` READ or WRITE, ``lock_id`` the kernel's number that ties a waiter to the
    lock it waits for."""
    pid: Int
    inode: Int
    dev: str = ""
    kind: str = ""
    access: str = ""
    waiting: bool = False
    lock_id: Int = 0


class ServedConnections(Event, tag="srv"):
    """Connections ``pid`` took on a TCP ``port`` it listens on since the proc backend's last
    socket dump (linux/tcpdiag.accepted_since: accepted, or closed by the server's side): a
    server answering each request on a new connection, seen without a syscall backend."""
    pid: Int
    port: Int
    count: Int = 0


class FileMount(Event, tag="fmt"):
    """The file or device a blocked thread of ``pid`` waits on through fd ``fd`` (-1: a page fault
    on a file it maps, ``call`` "mapped"), and its mount
    (record/probes/storage_waits.py, from /proc/PID/fdinfo and /proc/PID/mountinfo): the
    ``path``, the thread ``tid`` and its ``state`` ("D", "S"), ``call`` the call it is in (from
    /proc/TID/syscall), the mount's ``mount_id``, ``dev`` ("0:40"), ``mountpoint``, ``fstype``
    ("fuse", "nfs4", "sysfs") and ``source`` (the NFS server, the FUSE daemon's name). For FUSE,
    ``fuse_conn`` is the connection (/sys/fs/fuse/connections/N; for an fd on /dev/fuse itself,
    the connection it serves) and ``servers`` the pids on this host holding /dev/fuse for it,
    ``server_states`` one line each ("S in read(/dev/fuse)")."""
    pid: Int
    tid: Int
    fd: Int
    path: str = ""
    state: str = ""
    call: str = ""
    mount_id: Optional[Int] = None
    dev: str = ""
    mountpoint: str = ""
    fstype: str = ""
    source: str = ""
    fuse_conn: Optional[Int] = None
    servers: List[Int] = field(default_factory=list)
    server_states: List[str] = field(default_factory=list)
