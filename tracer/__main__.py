"""``python -m tracer`` is the ``hangtrace`` command."""
from .cli import main

if __name__ == "__main__":
    main()
