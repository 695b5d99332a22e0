"""The stop inside the loops over a target's data (issue 46 item 5; linux/cancel.py,
record/stopflag.py): when StopFlag.cut says stop, the walks raise Cancelled within a few
thousand items, never after the whole table; the waits return within a slice. Each row fails
on main (5e78431), where a signal was looked at only between probes."""
from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Callable, Optional

import pytest

from hostile_elf import named_symbol_bomb, symbol_bomb
from tracer.linux import cancel
from tracer.record import stopflag
from tracer.record.stopflag import StopFlag


@pytest.fixture
def stop_after() -> Callable[[int], None]:
    """Install a stop that says SIGTERM from its ``n``-th question on."""
    installed = []

    def install(n: int) -> None:
        asked = [0]

        def says() -> Optional[str]:
            asked[0] += 1
            return "SIGTERM" if asked[0] >= n else None
        installed.append(says)
        cancel.install(says)
    yield install
    for says in installed:
        cancel.uninstall(says)


# ------------------------------------------------------------------ StopFlag.cut
def test_a_signal_before_the_window_or_after_it_cuts_at_once() -> None:
    before = StopFlag()
    before._handler(signal.SIGTERM, None)
    assert before.cut() and before.why() == "SIGTERM"
    after = StopFlag()
    after.window_opened()
    after.window_closed()
    assert not after.cut()
    after._handler(signal.SIGINT, None)
    assert after.cut() and after.why() == "SIGINT"


def test_a_signal_in_the_window_leaves_the_end_its_grace_then_cuts() -> None:
    flag = StopFlag()
    flag.window_opened()
    flag._handler(signal.SIGTERM, None)
    assert not flag.cut() and flag.why() is None       # the end runs on, for a moment
    assert flag.at is not None
    flag.at -= stopflag.STOP_GRACE_S                   # the grace spent
    assert flag.cut()
    again = StopFlag()
    again.window_opened()
    again._handler(signal.SIGTERM, None)
    again.window_closed()
    again._handler(signal.SIGTERM, None)               # a second one: at once
    assert again.cut()


def test_install_and_restore_put_the_stop_in_place_and_take_it_back() -> None:
    flag = StopFlag()
    flag.install()
    try:
        flag._handler(signal.SIGTERM, None)
        with pytest.raises(cancel.Cancelled, match="SIGTERM ended the recording"):
            cancel.check()
    finally:
        flag.restore()
    assert cancel.stopping() is None                   # a bound method, taken back by ==
    cancel.check()


# ------------------------------------------------------------------ inside the walks
def test_the_elf_symbol_walk_stops_inside_and_caches_nothing(tmp_path: Path, stop_after,
                                                             monkeypatch) -> None:
    from tracer.linux.elfsyms import function_symbols
    monkeypatch.setenv("HANGTRACE_SYMBOL_CACHE", str(tmp_path / "cache"))
    lib = tmp_path / "libcuda.so.1"
    lib.write_bytes(named_symbol_bomb(50_000))
    stop_after(3)                        # the third check: 8,192 of 50,000 symbols read
    with pytest.raises(cancel.Cancelled):
        function_symbols(str(lib))
    cancel.uninstall(cancel._installed)  # type: ignore[arg-type]
    assert len(function_symbols(str(lib))) == 50_000     # read whole: the cut one not kept


def test_probe_sites_are_one_pass_over_the_names(tmp_path: Path, monkeypatch) -> None:
    """100,000 names of a target's library: main sorted and matched them once per family
    (13 for libnccl): 9 s here under load; one pass now."""
    from tracer.record.backends.ebpf.cuda_uprobes import NCCL_FAMILIES, probe_sites
    monkeypatch.setenv("HANGTRACE_SYMBOL_CACHE", "")
    lib = tmp_path / "libnccl.so.2"
    lib.write_bytes(named_symbol_bomb(100_000))
    t0 = time.thread_time()
    assert probe_sites(str(lib), NCCL_FAMILIES) == []
    assert time.thread_time() - t0 < 2.0


def test_pyelftools_name_reads_are_bounded_inside_a_name(tmp_path: Path, monkeypatch) -> None:
    """A NUL-less string table: pyelftools reads each name 64 bytes at a time to the end of
    the file; main looked at its deadline every 1,024 symbols, each costing a whole scan."""
    from tracer.record.probes import elfsyms
    monkeypatch.setenv("HANGTRACE_SYMBOL_CACHE", "")
    monkeypatch.setattr(elfsyms, "MAX_SECONDS", 0.3)
    lib = tmp_path / "libpython3.99.so"
    lib.write_bytes(symbol_bomb(400, 4 << 20))
    t0 = time.thread_time()
    table = elfsyms.symbols(str(lib))
    assert time.thread_time() - t0 < 2.0
    assert "read in part" in table.why or "not readable" in table.why, table.why


def test_a_stop_inside_the_pyelftools_read_raises(tmp_path: Path, stop_after,
                                                  monkeypatch) -> None:
    from tracer.record.probes import elfsyms
    monkeypatch.setenv("HANGTRACE_SYMBOL_CACHE", "")
    lib = tmp_path / "libpython3.98.so"
    lib.write_bytes(symbol_bomb(400, 4 << 20))
    stop_after(2)
    t0 = time.thread_time()
    with pytest.raises(cancel.Cancelled):
        elfsyms.symbols(str(lib))
    assert time.thread_time() - t0 < 1.0


@pytest.mark.parametrize("source", [
    "y = " + "-" * 100_000 + "1\n",           # MemoryError in ast.parse
    "y = f" + "()" * 100_000 + "\n",          # RecursionError
    "y = x" + ".a" * 200_000 + "\n",          # RecursionError
])
def test_sources_nested_thousands_deep_are_no_blocks_not_an_error(source: str) -> None:
    """Found by tests/target_fuzz.py: graph_with_blocks raised (contract: never)."""
    from tracer.record.evidence.capture import graph_with_blocks
    assert graph_with_blocks("with graph(g):\n    pass\n" + source) == []


def test_the_source_walk_stops_inside(stop_after) -> None:
    from tracer.record.evidence.capture import graph_with_blocks
    source = "with torch.cuda.graph(g):\n    x = 1\n" * 3000
    stop_after(2)
    with pytest.raises(cancel.Cancelled):
        graph_with_blocks(source)


# ------------------------------------------------------------------ waits
def test_waits_end_within_a_slice_of_a_stop(stop_after) -> None:
    never = threading.Event()
    t0 = time.monotonic()
    stop_after(3)
    assert cancel.wait(never, 30.0) is False
    assert time.monotonic() - t0 < 5 * cancel.SLICE_S + 1.0
    sleeper = threading.Thread(target=never.wait, args=(30,), daemon=True)
    sleeper.start()
    with pytest.raises(cancel.Cancelled):
        cancel.join(sleeper, 30.0)
    never.set()


# ------------------------------------------------------------------ found by target_fuzz
@pytest.mark.parametrize("section, field, value", [
    (2, 4, 1),                 # .dynsym made PROGBITS (sh_type)
    (2, 4, 0xFFFFFFFE),        # .dynsym of an unknown type
    (3, 0, 7),                 # .dynstr named ".dynsym" (sh_name)
])
def test_a_section_named_as_a_symbol_table_of_another_type_is_no_table(
        tmp_path: Path, monkeypatch, section: int, field: int, value: int) -> None:
    """scripts/fuzz.py --mode elf: probes/elfsyms.symbols raised AttributeError ('Section'
    object has no attribute 'iter_symbols'); contract: an empty table, never an error."""
    import struct
    from tracer.record.probes import elfsyms
    monkeypatch.setenv("HANGTRACE_SYMBOL_CACHE", "")
    data = bytearray(named_symbol_bomb(64))
    shoff, = struct.unpack_from("<Q", data, 40)
    struct.pack_into("<I", data, shoff + 64 * section + field, value)
    lib = tmp_path / f"libx{section}{field}{value}.so"
    lib.write_bytes(bytes(data))
    table = elfsyms.symbols(str(lib))
    assert table.names == []
