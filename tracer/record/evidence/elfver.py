"""Version strings inside ELF shared libraries, read with pyelftools (a dependency of
hangtrace, imported when an ELF file is first read).

Contract:
- ``section_search(path, section, pattern)``: the first match of a bytes regex in one section
  of an ELF file (opened by target_files.open_mapped_file), read in chunks (``CHUNK`` bytes,
  overlapping by ``OVERLAP``), at most ``MAX_BYTES``; None where there is none or after
  ``MAX_SECONDS``. Raises nothing but linux/cancel.py's ``Cancelled`` on a stop.
- ``nccl_version(path)``: (version, detail) from the "NCCL version 2.21.5+cuda12.4" string that
  NCCL builds into .rodata (src/init.cc VERSION_STRING: "NCCL version " MAJOR.MINOR.PATCH
  SUFFIX "+cuda" CUDA_MAJOR.CUDA_MINOR; forks such as RCCL drop the "+cuda" part, so it is
  optional); detail is any suffix plus "+cuda12.4".
"""
from __future__ import annotations

import re
import time
from typing import Optional, Pattern, Tuple

from ...linux import cancel
from ...linux.elfsyms import section_headers_problem
from ...linux.target_files import TargetFileRefused, open_mapped_file

__all__ = ["section_search", "nccl_version"]
CHUNK = 4 << 20
OVERLAP = 256
MAX_BYTES = 256 << 20
MAX_FILE_BYTES = 8 << 30          # only the section is read: this bounds what is opened at all
MAX_SECONDS = 2.0                 # pyelftools' look for the section (its name's reads)
NCCL_RE = re.compile(rb"NCCL version (\d+)\.(\d+)\.(\d+)([^\x00+]{0,32})(?:\+cuda(\d+)\.(\d+))?")


def _section_range(f, name: str) -> Optional[Tuple[int, int]]:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    if section_headers_problem(f) is not None:     # pyelftools walks every section claimed
        return None
    try:
        f.seek(0)       # pyelftools reads each section's name to its NUL: bounded in time
        elf = ELFFile(cancel.CheckedReader(f, time.monotonic() + MAX_SECONDS))
        sec = elf.get_section_by_name(name)
    except (ELFError, ValueError, AssertionError):
        return None
    except cancel.Cancelled:
        if cancel.stopping():
            raise
        return None
    if sec is None or sec["sh_type"] == "SHT_NOBITS":
        return None
    return int(sec["sh_offset"]), int(sec["sh_size"])


def section_search(path: str, section: str, pattern: Pattern[bytes]) -> Optional["re.Match"]:
    """First match of ``pattern`` in ``section`` of the ELF file at ``path`` (module doc)."""
    try:
        with open_mapped_file(path, max_bytes=MAX_FILE_BYTES) as f:
            rng = _section_range(f, section)
            if rng is None:
                return None
            offset, size = rng
            size = min(size, MAX_BYTES)
            done, tail = 0, b""
            while done < size:
                cancel.check()
                f.seek(offset + done)
                chunk = f.read(min(CHUNK, size - done))
                if not chunk:
                    return None
                buf = tail + chunk
                done += len(chunk)
                m = pattern.search(buf)
                # A match near the end may continue in the next chunk (an optional part):
                # read on with the match kept in the overlap.
                if m and (m.end() <= len(buf) - OVERLAP or done >= size):
                    return m
                tail = buf[m.start():] if m else buf[-OVERLAP:]
    except (OSError, TargetFileRefused):
        return None
    return None


def nccl_version(path: str) -> Optional[Tuple[str, str]]:
    """("2.21.5", "+cuda12.4") from a libnccl (module doc), None when not found."""
    m = section_search(path, ".rodata", NCCL_RE)
    if m is None:
        return None
    major, minor, patch, suffix, cmaj, cmin = (g.decode("ascii", "replace") if g else ""
                                               for g in m.groups())
    return f"{major}.{minor}.{patch}", suffix + (f"+cuda{cmaj}.{cmin}" if cmaj else "")

