"""Loading: what a path names, told once (``inputs.open_input``: a trace, an strace log, the
files of strace -ff, Flight Recorder dumps), and a trace read into the analyzer
(``trace.analyze_trace``). The analyzer itself (analysis/) is fed events and opens no file."""
