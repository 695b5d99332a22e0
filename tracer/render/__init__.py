"""Renderers: the console report (console), the live view (live), snapshots (snapshot) and
exports of a saved trace (export/). Renderers read reports and traces, never /proc.
May import: tracer.events, tracer.report, tracer.analysis, tracer.tracefile."""
