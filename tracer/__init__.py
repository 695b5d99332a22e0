"""hangtrace: tell whether a silent process tree is progressing, busy-waiting or deadlocked."""
__version__ = "0.1.0"
