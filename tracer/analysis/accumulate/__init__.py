"""Stage 1: events in time order into bounded per-thread and per-process statistics
(``accumulator``, ``stats``), what a write or read means (``io_class``), socket traffic and the
keep-alive rule (``traffic``), the kernel's counts under eBPF (``kernel_counts``), NVML readings
(``gpu``) and Python stacks (``stacks``). Nothing classified here. May import vocab."""
