"""Stages 2 and 6, the verdicts: pure rules per thread (``thread``, ``gpu``, ``observed``), per
process (``process``) and for the tree (``tree``, ``partial``, ``merged``), each verdict naming the
rule that fired and its evidence. Rules read typed facts and the settled wait-for graph, never
another rule's text. May import vocab, accumulate, job and waitgraph."""
