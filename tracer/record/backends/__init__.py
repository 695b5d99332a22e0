"""Recording backends behind one interface (base.py): proc, strace, ebpf, nvml. Optional
dependencies (bcc) are imported inside their backend only."""
