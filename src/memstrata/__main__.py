"""``python -m memstrata``: the CLI."""

from memstrata.cli import main

main()
