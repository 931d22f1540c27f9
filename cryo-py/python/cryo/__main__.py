"""``python -m cryo``: the command line (see :mod:`cryo.cli`)."""

from .cli import run

if __name__ == "__main__":
    run()
