"""analysis/job/ranks.py reads the integer argument that numbers a job's command lines with
linux/intparse.py (issue 46, item 6): an argument of ``²`` or of 5,000 digits is no number,
never an exception in ``analyze``."""
from __future__ import annotations

import pytest

from tracer.analysis.job import ranks


def test_command_lines_numbered_0_to_n_give_ranks():
    assert ranks._index({10: ["worker", "0"], 11: ["worker", "1"]}) == {10: 0, 11: 1}


@pytest.mark.parametrize("odd", ["\u00b2", "\u0663", "9" * 5000, "+1", "1_0"])
def test_an_argument_that_is_no_ascii_number_numbers_nothing(odd):
    cmdlines = {10: ["worker", "0"], 11: ["worker", odd]}
    assert ranks._index(cmdlines) == {}
    assert ranks._shape(cmdlines[11]) == ("worker", odd)
