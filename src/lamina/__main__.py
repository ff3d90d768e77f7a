"""``python -m lamina``: the CLI."""

from lamina.cli import main

main()
