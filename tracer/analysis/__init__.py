"""The analyzer: events in, a ``Report`` out (``analyzer.Analyzer``; pure: never reads /proc).

Its stage folders, numbered once here (docs/ARCHITECTURE.md mirrors the list); a stage imports
only the stages before it (tests/unit/test_architecture.py):
0 ``vocab``, the words every stage shares; 1 ``accumulate``, events into bounded statistics;
2 ``progress``, what advances besides bytes written; 3 ``job``, who is who in the job;
4 ``threads``, one verdict per thread; 5 ``waitgraph``, the one wait-for model;
6 ``verdicts``, the verdicts of processes and of the tree; 7 ``evidence``, what an engineer
checks by hand. report_build.py runs them (job's stragglers take the thread verdicts)."""

STAGES = ("vocab", "accumulate", "progress", "job", "threads", "waitgraph", "verdicts",
          "evidence")
