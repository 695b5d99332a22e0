"""Stage 6, the verdicts of processes and of the tree: they read the settled wait-for graph and
typed facts (``process``, ``tree``, ``chain_text``), never another rule's text; threads stuck
while the tree goes on (``partial``), what was not recorded (``merged``), partial views
(``view``). May import vocab, accumulate, progress, job, threads and waitgraph."""
