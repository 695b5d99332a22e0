"""The targeted fuzz cases (tests/target_fuzz.py) in CI: a fixed seed and a few dozen cases of
each kind (ELF files, Python sources, RAS answers, process titles, ints in strace lines), a
few seconds in all; ``scripts/fuzz.py --mode targets`` runs as many as asked for. Each must
end as its reader's contract says (no exception it does not name) within its CPU bound."""
from __future__ import annotations

import pytest

import target_fuzz

SEED = 20261207
COUNTS = {"elf": 40, "source": 25, "ras": 40, "title": 30, "fd": 12}
CPU_BOUND = 5.0


@pytest.mark.parametrize("kind", target_fuzz.KINDS)
def test_targeted_cases_end_as_their_contracts_say(kind: str) -> None:
    failures = []
    for what, data in target_fuzz.cases(kind, SEED, COUNTS[kind]):
        why, cpu = target_fuzz.run_case(kind, data)
        if why is None and cpu > CPU_BOUND:
            why = f"took {cpu:.1f} s of CPU"
        if why:
            failures.append(f"{what[:120]}: {why}")
    assert not failures, "\n".join(failures[:10])


def test_the_cases_reach_what_they_target() -> None:
    """The ELF cases damage each part named (the header, the sections, the symbols, the
    string tables), and the sources hold what broke ast before (nesting thousands deep)."""
    hows = " ".join(w for w, _ in target_fuzz.cases("elf", SEED, 200))
    for part in ("ELF header", "section header", "symbol st_", "string table",
                 "extended numbering", "cut at"):
        assert part in hows, part
    assert any("deep" in w for w, _ in target_fuzz.cases("source", SEED, 60))
