"""What the NVML modules share (nvml.py, nvml_py.py through nvidia-ml-py, nvml_health.py):
the one error they raise, with a one-line message for the user, and nvml.h's constants."""
from __future__ import annotations

__all__ = ["NvmlError", "NVML_CLOCK_SM"]

NVML_CLOCK_SM = 1          # nvmlClockType_t


class NvmlError(Exception):
    """NVML cannot be used here; the message is one line for the user."""
