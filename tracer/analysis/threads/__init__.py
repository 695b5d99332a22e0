"""Stage 4, the thread rules: one verdict per thread from its statistics (``thread``, ``gpu``,
``output``, ``observed``; ``context``: what a rule is given), then what the stacks and pools
show (``stacks``, ``pools``). Each verdict names the rule that fired and its evidence. May import
vocab, accumulate, progress and job."""
