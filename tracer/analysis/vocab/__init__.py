"""Stage 0, the shared vocabulary every stage speaks: verdicts, block kinds and notes
(``verdict``), what a blocked thread waits in (``waits``), what the end-of-recording probes found
(``facts``) and node keys of merged traces (``nodes``). Imports nothing else of analysis."""
