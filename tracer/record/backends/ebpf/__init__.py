"""The eBPF backend, one tool the libbpf-tools way: its C lives in bpf/ at the top (program +
shared header), the loaders, layout mirror, counters and converters here."""
