"""Trace files: the versioned format (format), row validation (validate), fast row writing
(rows), bounded block reading (blocks), and several nodes' traces as one stream (nodes/). May
import: tracer.events, tracer.linux, tracer.gpu, tracer.errors."""
