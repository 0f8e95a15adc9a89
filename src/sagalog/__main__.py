"""``python -m sagalog``: the CLI without relying on the console script being on PATH."""

from sagalog.cli.main import main

main()
