"""The BPF C programs of the eBPF backend, as package data (``tracer.bpf`` once built: see
tracer/resources.py). Nothing here is Python code to import."""
