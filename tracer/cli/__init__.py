"""The command line: ``commands`` (the ``hangtrace`` group, its commands and the one place that
turns errors into lines and exit statuses) and ``nodes`` (merge and cluster, added to the group).
``entry`` is the console script."""
from .commands import entry, main

__all__ = ["entry", "main"]
