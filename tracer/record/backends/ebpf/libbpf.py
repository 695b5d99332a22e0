"""libbpf.so.1 through ctypes: the calls hangtrace's CO-RE loader makes, and nothing else.

Contract:
- ``library()`` -> the loaded library with every prototype below declared (cached); where it
  is found and when it is refused (``LibbpfMissing``, one line): its docstring.
- ``version()`` -> "1.1.2", ``path()`` -> the file it came from.
- libbpf's own messages (warnings, the verifier's log) never reach stderr: ``LOG`` keeps the
  last ``LOG_LINES`` lines (``listen()`` before a load: empties it, and takes the messages back
  from a BCC loaded in the process), and ``log_tail()`` gives the end of them for an error line.
- ``check(rc, what)`` / ``check_ptr(p, what)`` turn libbpf's -errno / NULL+errno returns into
  ``OSError(errno, "what: strerror[; libbpf: last message]")``.
Loads no BPF object; only dlopen's side effects.
"""
from __future__ import annotations

import collections
import ctypes as ct
import errno as errno_mod
import os
import re
from typing import Deque, List, Optional, Tuple

__all__ = ["LibbpfMissing", "library", "version", "path", "check", "check_ptr", "log_tail",
           "LOG", "listen", "MIN_VERSION", "SAMPLE_FN", "BtfType", "BtfVarSecinfo"]

MIN_VERSION = (1, 0)
LOG_LINES = 200
LOG: Deque[str] = collections.deque(maxlen=LOG_LINES)

_P, _I, _U32, _U64, _SZ = ct.c_void_p, ct.c_int, ct.c_uint32, ct.c_uint64, ct.c_size_t
_S = ct.c_char_p
SAMPLE_FN = ct.CFUNCTYPE(ct.c_int, ct.c_void_p, ct.c_void_p, ct.c_size_t)
_PRINT_FN = ct.CFUNCTYPE(ct.c_int, ct.c_int, ct.c_char_p, ct.c_void_p)

# name: (restype, argtypes)
_PROTOS = {
    "libbpf_major_version": (_U32, []),
    "libbpf_minor_version": (_U32, []),
    "libbpf_version_string": (_S, []),
    "libbpf_set_print": (_P, [_PRINT_FN]),
    "libbpf_num_possible_cpus": (_I, []),
    "libbpf_probe_bpf_map_type": (_I, [_I, _P]),
    "libbpf_probe_bpf_prog_type": (_I, [_I, _P]),
    "libbpf_probe_bpf_helper": (_I, [_I, _I, _P]),
    "bpf_object__open_file": (_P, [_S, _P]),
    "bpf_object__load": (_I, [_P]),
    "bpf_object__close": (None, [_P]),
    "bpf_object__btf": (_P, [_P]),
    "bpf_object__find_map_by_name": (_P, [_P, _S]),
    "bpf_object__find_program_by_name": (_P, [_P, _S]),
    "bpf_object__next_program": (_P, [_P, _P]),
    "bpf_program__name": (_S, [_P]),
    "bpf_program__set_autoload": (_I, [_P, ct.c_bool]),
    "bpf_program__attach": (_P, [_P]),
    "bpf_program__attach_uprobe": (_P, [_P, ct.c_bool, _I, _S, _SZ]),
    "bpf_link__destroy": (_I, [_P]),
    "bpf_map__fd": (_I, [_P]),
    "bpf_map__type": (_I, [_P]),
    "bpf_map__key_size": (_U32, [_P]),
    "bpf_map__value_size": (_U32, [_P]),
    "bpf_map__max_entries": (_U32, [_P]),
    "bpf_map__set_max_entries": (_I, [_P, _U32]),
    "bpf_map__initial_value": (_P, [_P, ct.POINTER(_SZ)]),
    "bpf_map_lookup_elem": (_I, [_I, _P, _P]),
    "bpf_map_update_elem": (_I, [_I, _P, _P, _U64]),
    "bpf_map_get_next_key": (_I, [_I, _P, _P]),
    "bpf_map_lookup_batch": (_I, [_I, _P, _P, _P, _P, ct.POINTER(_U32), _P]),
    "btf__find_by_name_kind": (ct.c_int32, [_P, _S, _U32]),
    "btf__type_by_id": (_P, [_P, _U32]),
    "btf__name_by_offset": (_S, [_P, _U32]),
    "ring_buffer__new": (_P, [_I, SAMPLE_FN, _P, _P]),
    "ring_buffer__poll": (_I, [_P, _I]),
    "ring_buffer__consume": (_I, [_P]),
    "ring_buffer__free": (None, [_P]),
}


class LibbpfMissing(Exception):
    """libbpf.so.1 cannot be used here (one line: the message)."""


class BtfType(ct.Structure):
    """struct btf_type (linux/btf.h): name_off, info (kind in bits 24-28, vlen in 0-15), size."""
    _fields_ = [("name_off", _U32), ("info", _U32), ("size", _U32)]


class BtfVarSecinfo(ct.Structure):
    """struct btf_var_secinfo: one variable of a DATASEC."""
    _fields_ = [("type", _U32), ("offset", _U32), ("size", _U32)]


_lib: Optional[ct.CDLL] = None
_path = ""
_printer = None      # keeps the callback alive
_libc = ct.CDLL(None, use_errno=True)
_libc.vsnprintf.argtypes = [ct.c_char_p, ct.c_size_t, ct.c_char_p, ct.c_void_p]


_DEBUG = 2      # enum libbpf_print_level: WARN 0, INFO 1, DEBUG 2


def _on_print(level: int, fmt: bytes, ap: int) -> int:
    if level >= _DEBUG:
        return 0
    buf = ct.create_string_buffer(1 << 16)      # the verifier's log comes as one message
    try:
        _libc.vsnprintf(buf, len(buf), fmt, ap)
        text = buf.value.decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - a message must never break loading
        text = (fmt or b"").decode("utf-8", "replace")
    for line in text.splitlines():
        if line.strip():
            LOG.append(line.rstrip())
    return 0


def _where() -> str:
    return os.environ.get("HANGTRACE_LIBBPF") or "libbpf.so.1"


def library() -> ct.CDLL:
    """The library, prototypes declared (cached). Where: ``$HANGTRACE_LIBBPF`` (a path) when set,
    else ``libbpf.so.1`` through the dynamic linker (LD_LIBRARY_PATH, the ld.so cache). Raises
    ``LibbpfMissing`` with one line saying why: not found, or older than ``MIN_VERSION`` (1.0:
    NULL/-errno returns, ``libbpf_probe_*``)."""
    global _lib, _path, _printer
    if _lib is not None:
        return _lib
    name = _where()
    try:
        lib = ct.CDLL(name, use_errno=True)
    except OSError as exc:
        raise LibbpfMissing(f"{name} not found ({exc}): apt install libbpf1") from None
    for fn, (res, args) in _PROTOS.items():
        try:
            f = getattr(lib, fn)
        except AttributeError:
            raise LibbpfMissing(f"{name} lacks {fn}: libbpf {MIN_VERSION[0]}.{MIN_VERSION[1]} "
                                "or newer is needed") from None
        f.restype, f.argtypes = res, args
    have = (lib.libbpf_major_version(), lib.libbpf_minor_version())
    if have < MIN_VERSION:
        raise LibbpfMissing(f"{name} is libbpf {have[0]}.{have[1]}: "
                            f"{MIN_VERSION[0]}.{MIN_VERSION[1]} or newer is needed")
    _printer = _PRINT_FN(_on_print)
    lib.libbpf_set_print(_printer)
    _lib, _path = lib, _resolved(name)
    return lib


def listen() -> None:
    """``LOG`` emptied, and libbpf's messages sent to it from now on, again: BCC links the same
    libbpf.so.1 and sets its own printer when it loads a program in this process (which sent
    the verifier's log of a later CO-RE load to BCC's printer, never to ``LOG``)."""
    library().libbpf_set_print(_printer)
    LOG.clear()


def _resolved(name: str) -> str:
    """The file the dynamic linker loaded for ``name`` (from /proc/self/maps)."""
    base = os.path.basename(name)
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.rstrip().split(" ", 5)[-1].strip()
                if os.path.basename(p).startswith(base.split(".so")[0] + ".so"):
                    return p
    except OSError:
        pass
    return name


def version() -> str:
    """x.y.z from the file's name where it says (libbpf.so.1.1.2), else libbpf's x.y."""
    lib = library()
    m = re.search(r"libbpf\.so\.(\d+\.\d+\.\d+)$", _path)
    return m.group(1) if m else lib.libbpf_version_string().decode().lstrip("v")


def path() -> str:
    library()
    return _path


_STATS = ("processed ", "verification time", "stack depth", "max_states", "libbpf: --",
          "-- ", "Validating", "R1=", "; ")


def verifier_reason(log: List[str]) -> str:
    """The verifier's own reason in a program load log: the last two lines of the log that
    are not a statistic, an instruction or a source line ("" when the log has none)."""
    ends = [i for i, ln in enumerate(log) if "-- END PROG LOAD LOG --" in ln]
    if not ends:
        return ""
    found: List[str] = []
    for line in reversed(log[:ends[-1]]):
        text = line.strip()
        if re.match(r"^\d+: \(", text) or text.startswith(_STATS) or not text:
            if found:
                break
            continue
        found.insert(0, text)
        if len(found) == 2:
            break
    return "; ".join(found)


def log_tail(lines: int = 2) -> str:
    """The last libbpf messages on one line, the verifier's reason first when a program was
    rejected ("" when there were none)."""
    log = list(LOG)
    tail = [ln.replace("libbpf: ", "", 1) for ln in log[-lines:]]
    reason = verifier_reason(log)
    return " | ".join(([f"verifier: {reason}"] if reason else []) + tail)


def _error(code: int, what: str) -> OSError:
    msg = f"{what}: {os.strerror(code) if code else 'failed'}"
    tail = log_tail()
    return OSError(code or errno_mod.EINVAL, msg + (f"; libbpf: {tail}" if tail else ""))


def check(rc: int, what: str) -> int:
    """``rc`` when >= 0, else OSError (module doc)."""
    if rc < 0:
        raise _error(-rc, what)
    return rc


def check_ptr(p: Optional[int], what: str) -> int:
    """``p`` when not NULL, else OSError from errno (module doc)."""
    if not p:
        raise _error(ct.get_errno(), what)
    return p


def version_tuple() -> Tuple[int, int]:
    lib = library()
    return lib.libbpf_major_version(), lib.libbpf_minor_version()
