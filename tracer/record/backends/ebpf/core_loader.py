"""A CO-RE object (bpf/NAME.bpf.o) loaded with libbpf: the ``Program`` of loader.py.

Contract:
- ``CoreProgram(path, *, max_entries, settings, programs, attach, struct_sizes)`` opens,
  checks, sizes, configures, loads and attaches the object (its docstring says how); on any
  failure everything opened is closed and OSError says what failed, with libbpf's last
  message. ``load_s``: the seconds all of that took.
- ``attach_uprobe(program, binary, symbol, offset)``: a uprobe at the file offset of
  ``symbol`` in ``binary``, for every process (the program filters); raises OSError.
- ``map(name)``: a ``LibbpfMap``, read with bpf_map_lookup_batch (kernel 5.6+), else by key.
- ``detach()`` destroys every link; ``close()`` also frees the ring buffer and closes the
  object. Both idempotent; after ``close()`` nothing of it is left in the kernel.
"""
from __future__ import annotations

import ctypes as ct
import errno
import threading
import time
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ....install import core_objects_fix
from . import libbpf as B
from .loader import OnRecord

__all__ = ["CoreProgram", "LibbpfMap"]

_BTF_KIND_STRUCT, _BTF_KIND_VAR, _BTF_KIND_DATASEC = 4, 14, 15
_BPF_NOEXIST = 1
_BATCH = 1024
_ENOUGH = -1        # a sample callback's answer that ends ring_buffer__poll/consume


class LibbpfMap:
    """One map of a loaded object (MapView in loader.py)."""

    def __init__(self, handle: int) -> None:
        lib = B.library()
        self.fd = lib.bpf_map__fd(handle)
        self.key_size = lib.bpf_map__key_size(handle)
        self.value_size = lib.bpf_map__value_size(handle)
        self.max_entries = lib.bpf_map__max_entries(handle)
        self._batch_ok = True

    def get(self, key: bytes) -> Optional[bytes]:
        v = ct.create_string_buffer(self.value_size)
        if B.library().bpf_map_lookup_elem(self.fd, key, v) != 0:
            return None
        return v.raw

    def set(self, key: bytes, value: bytes, only_new: bool = False) -> bool:
        rc = B.library().bpf_map_update_elem(self.fd, key, value,
                                             _BPF_NOEXIST if only_new else 0)
        if rc == -errno.EEXIST and only_new:
            return False
        B.check(rc, "bpf_map_update_elem")
        return True

    def percpu(self, key: bytes) -> List[bytes]:
        ncpu = B.check(B.library().libbpf_num_possible_cpus(), "libbpf_num_possible_cpus")
        step = (self.value_size + 7) // 8 * 8
        buf = ct.create_string_buffer(step * ncpu)
        B.check(B.library().bpf_map_lookup_elem(self.fd, key, buf), "bpf_map_lookup_elem")
        raw = buf.raw
        return [raw[i * step:i * step + self.value_size] for i in range(ncpu)]

    def items(self) -> List[Tuple[bytes, bytes]]:
        if self._batch_ok:
            try:
                return self._items_batched()
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP,
                                     errno.ENOSYS):
                    raise
                self._batch_ok = False      # kernels before 5.6: key by key
        return self._items_by_key()

    def _items_batched(self) -> List[Tuple[bytes, bytes]]:
        lib = B.library()
        n = max(1, min(_BATCH, self.max_entries))
        ks, vs = self.key_size, self.value_size
        keys, values = ct.create_string_buffer(ks * n), ct.create_string_buffer(vs * n)
        token = ct.create_string_buffer(max(ks, 8))
        out: List[Tuple[bytes, bytes]] = []
        first = True
        while True:
            count = ct.c_uint32(n)
            rc = lib.bpf_map_lookup_batch(self.fd, None if first else token, token, keys,
                                          values, ct.byref(count), None)
            err = ct.get_errno() if rc < 0 else 0
            kraw, vraw = keys.raw, values.raw
            out.extend((kraw[i * ks:(i + 1) * ks], vraw[i * vs:(i + 1) * vs])
                       for i in range(count.value))
            if rc < 0 and err == errno.ENOENT:
                return out                  # the last batch
            if rc < 0:
                raise OSError(err, f"bpf_map_lookup_batch: {errno.errorcode.get(err, err)}")
            first = False

    def _items_by_key(self) -> List[Tuple[bytes, bytes]]:
        lib = B.library()
        out: List[Tuple[bytes, bytes]] = []
        key, nxt = None, ct.create_string_buffer(self.key_size)
        for _ in range(self.max_entries + 1):
            if lib.bpf_map_get_next_key(self.fd, key, nxt) != 0:
                break
            key = ct.create_string_buffer(nxt.raw, self.key_size)
            value = self.get(key.raw)
            if value is not None:
                out.append((key.raw, value))
        return out


class CoreProgram:
    """A loaded CO-RE object. The constructor opens the object, refuses it (OSError: "built from
    other sources") when a struct of its BTF (the maps' key and value types) does not have the size
    ``struct_sizes`` ({name: bytes}, the Python mirror's) gives, or it has none of them, sets the
    maps' sizes (``max_entries``: {map: n}), writes ``settings`` ({name: int}) into the variables
    ``ht_set_<name>`` of its .rodata (found by name in the object's BTF, sized as declared), loads
    it (libbpf applies the CO-RE relocations against the running kernel's BTF, then the verifier
    runs) and, unless ``attach=False``, attaches each program (its ELF section names the
    tracepoint: tp_btf/..., raw_tp/...). ``programs`` limits which are loaded (the others are
    not)."""

    loader = "libbpf"

    def __init__(self, path: str, *, max_entries: Optional[Mapping[str, int]] = None,
                 settings: Optional[Mapping[str, int]] = None,
                 programs: Optional[Sequence[str]] = None, attach: bool = True,
                 struct_sizes: Optional[Mapping[str, int]] = None) -> None:
        self.path = path
        self.load_s = 0.0
        self._lib = B.library()
        self._obj: Optional[int] = None
        self._links: List[int] = []
        self._rings: List[Tuple[int, object]] = []
        self._cut = False      # the last poll was ended by its callback (OnRecord: True)
        self._maps: Dict[str, LibbpfMap] = {}
        self._lock = threading.Lock()
        t0 = time.monotonic()
        B.listen()
        try:
            self._obj = B.check_ptr(self._lib.bpf_object__open_file(path.encode(), None),
                                    f"open {path}")
            self._check_structs(struct_sizes or {})
            self._configure(max_entries or {}, settings or {}, programs)
            B.check(self._lib.bpf_object__load(self._obj), f"load {path}")
            if attach:
                for prog in self._programs():
                    name = self._lib.bpf_program__name(prog).decode()
                    if programs is None or name in programs:
                        self._links.append(B.check_ptr(self._lib.bpf_program__attach(prog),
                                                       f"attach {name}"))
        except BaseException:
            self.close()
            raise
        self.load_s = time.monotonic() - t0

    # ------------------------------------------------------------------ setup
    def _programs(self) -> List[int]:
        out, prog = [], None
        while True:
            prog = self._lib.bpf_object__next_program(self._obj, prog)
            if not prog:
                return out
            out.append(prog)

    def _configure(self, max_entries: Mapping[str, int], settings: Mapping[str, int],
                   programs: Optional[Sequence[str]]) -> None:
        lib = self._lib
        for name, n in max_entries.items():
            m = B.check_ptr(lib.bpf_object__find_map_by_name(self._obj, name.encode()),
                            f"map {name}")
            B.check(lib.bpf_map__set_max_entries(m, n), f"size map {name}")
        if programs is not None:
            for prog in self._programs():
                if lib.bpf_program__name(prog).decode() not in programs:
                    B.check(lib.bpf_program__set_autoload(prog, False), "set_autoload")
        if settings:
            self._write_rodata(settings)

    def _check_structs(self, sizes: Mapping[str, int]) -> None:
        """The object was built from the sources this Python mirrors (``CoreProgram``)."""
        if not sizes:
            return
        lib = self._lib
        btf = B.check_ptr(lib.bpf_object__btf(self._obj), "object BTF")
        found = 0
        for name, size in sizes.items():
            tid = lib.btf__find_by_name_kind(btf, name.encode(), _BTF_KIND_STRUCT)
            if tid <= 0:
                continue        # only the maps' key and value types are in an object's BTF
            found += 1
            got = B.BtfType.from_address(lib.btf__type_by_id(btf, tid)).size
            if got != size:
                raise OSError(errno.EINVAL, f"{self.path} was built from other sources (struct "
                              f"{name}: {got} bytes, {size} expected): "
                              f"{core_objects_fix()}")
        if not found:
            raise OSError(errno.EINVAL, f"{self.path} has none of the structs "
                          f"{', '.join(sorted(sizes))}: {core_objects_fix()}")

    def _write_rodata(self, settings: Mapping[str, int]) -> None:
        """ht_set_<name> = value in .rodata, by the offsets the object's BTF gives."""
        lib = self._lib
        btf = B.check_ptr(lib.bpf_object__btf(self._obj), "object BTF")
        sec = lib.btf__find_by_name_kind(btf, b".rodata", _BTF_KIND_DATASEC)
        m = lib.bpf_object__find_map_by_name(self._obj, b".rodata")
        if sec < 0 or not m:
            raise OSError(errno.ENOENT, f"{self.path}: no .rodata for settings")
        size = ct.c_size_t()
        data = B.check_ptr(lib.bpf_map__initial_value(m, ct.byref(size)), ".rodata")
        t = B.BtfType.from_address(B.check_ptr(lib.btf__type_by_id(btf, sec), "DATASEC"))
        infos = (B.BtfVarSecinfo * (t.info & 0xFFFF)).from_address(
            lib.btf__type_by_id(btf, sec) + ct.sizeof(B.BtfType))
        where = {}
        for vs in infos:
            var = B.BtfType.from_address(lib.btf__type_by_id(btf, vs.type))
            if (var.info >> 24) & 0x1F == _BTF_KIND_VAR:
                where[lib.btf__name_by_offset(btf, var.name_off).decode()] = (vs.offset, vs.size)
        for name, value in settings.items():
            off, n = where.get(f"ht_set_{name}", (None, 0))
            if off is None or off + n > size.value:
                raise OSError(errno.ENOENT, f"{self.path}: no setting ht_set_{name}")
            ct.memmove(data + off, int(value).to_bytes(n, "little"), n)

    # ------------------------------------------------------------------ Program
    def map(self, name: str) -> LibbpfMap:
        m = self._maps.get(name)
        if m is None:
            if self._obj is None:
                raise OSError(errno.EBADF, f"map {name}: the object is closed")
            handle = B.check_ptr(self._lib.bpf_object__find_map_by_name(self._obj,
                                                                        name.encode()),
                                 f"map {name}")
            m = self._maps[name] = LibbpfMap(handle)
        return m

    def open_ring(self, name: str, on_record: OnRecord) -> None:
        def sample(ctx: int, data: int, size: int) -> int:
            if on_record(data, size):
                self._cut = True
                return _ENOUGH         # libbpf stops the drain here (the rest stays queued)
            return 0
        cb = B.SAMPLE_FN(sample)
        rb = B.check_ptr(self._lib.ring_buffer__new(self.map(name).fd, cb, None, None),
                         f"ring buffer {name}")
        self._rings.append((rb, cb))

    def poll(self, timeout_ms: int) -> None:
        for rb, _ in self._rings:
            self._cut = False
            rc = self._lib.ring_buffer__poll(rb, timeout_ms)
            if rc < 0 and rc != -errno.EINTR and not self._cut:
                B.check(rc, "ring_buffer__poll")

    def consume(self) -> None:
        for rb, _ in self._rings:
            self._lib.ring_buffer__consume(rb)

    def ring_fd(self, name: str) -> int:
        return self.map(name).fd

    def attach_uprobe(self, program: str, binary: str, symbol: str, offset: int,
                      retprobe: bool = False) -> None:
        prog = B.check_ptr(self._lib.bpf_object__find_program_by_name(self._obj,
                                                                      program.encode()),
                           f"program {program}")
        link = B.check_ptr(self._lib.bpf_program__attach_uprobe(prog, retprobe, -1,
                                                                binary.encode(), offset),
                           f"{'uretprobe' if retprobe else 'uprobe'} {binary}+{offset:#x}")
        self._links.append(link)

    def detach(self) -> None:
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            self._lib.bpf_link__destroy(link)

    def close(self) -> None:
        self.detach()
        with self._lock:
            rings, self._rings = self._rings, []
            obj, self._obj = self._obj, None
            self._maps = {}
        for rb, _ in rings:
            self._lib.ring_buffer__free(rb)
        if obj is not None:
            self._lib.bpf_object__close(obj)
