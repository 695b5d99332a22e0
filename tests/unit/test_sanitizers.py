"""The compiled helpers under AddressSanitizer and UBSan (issue 22 item 6): built into a temp
directory with gcc, then one bounded fuzz pass through them in a child that preloads the
sanitizer runtime (tests/sanitized.py): 0 sanitizer reports. Skipped, with the reason, where
gcc, Python.h or the sanitizer runtime is missing. scripts/fuzz.py --sanitizers runs longer."""
from __future__ import annotations

import pytest

import sanitized

SEED = 20261201
COUNT = 100


@pytest.mark.slow
def test_a_fuzz_pass_through_the_sanitized_helpers_reports_nothing(tmp_path) -> None:
    try:
        module = sanitized.build(str(tmp_path))
    except sanitized.Unavailable as e:
        pytest.skip(str(e))
    ran, reports, code = sanitized.fuzz_pass(module, SEED, COUNT)
    print(f"{ran} inputs through the sanitized helpers, {len(reports)} reports")
    assert not reports, "\n".join(reports[:20])
    assert code == 0 and ran >= COUNT


def test_the_report_pattern_finds_what_the_sanitizers_print() -> None:
    for line in ("==12==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x60",
                 "lines.c:321:13: runtime error: index 64 out of bounds",
                 "SUMMARY: UndefinedBehaviorSanitizer: undefined-behavior lines.c:3"):
        assert sanitized.REPORT.search(line)
    assert not sanitized.REPORT.search("hangtrace: x: corrupt trace")
