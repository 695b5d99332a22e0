"""Trace files: the versioned format (format), fast row writing (rows), and strace logs turned
into traces (strace/, strace_import, strace_parallel). May import: tracer.events, tracer.linux,
tracer.gpu, tracer.errors."""
