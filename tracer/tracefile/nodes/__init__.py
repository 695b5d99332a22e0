"""Several nodes' traces as one stream: node names and keys unique across nodes (``merge``),
clock offsets from send/receive pairs (``clock``)."""
