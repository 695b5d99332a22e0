"""The analyzer: accumulation of events, thread/process/tree rules, GPU and collective rules,
the wait-for graph; ``analyzer.Analyzer`` is the entry point (pure: never reads /proc)."""
