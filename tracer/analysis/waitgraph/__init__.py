"""Stage 5, the one wait-for model: ``build`` resolves every blocked thread's wait once into
edges, ``graph`` settles who can still act and proves a deadlock. May import vocab, accumulate
and job."""
