"""``python -m tracer`` is the ``hangtrace`` command."""
from .cli.commands import entry

if __name__ == "__main__":
    entry()
