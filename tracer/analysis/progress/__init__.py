"""Stage 2, progress: what advances, at what rate, from signals other than bytes written.
Each module reads accumulated statistics and typed events and says, per process, which work
advances and which only repeats (``log_lines``: a log line that repeats without news is a
heartbeat). Thread rules (threads/) read its answers; it imports vocab and accumulate only."""
