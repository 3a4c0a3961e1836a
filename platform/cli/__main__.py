"""``python -m lakelog.cli ...``: the ``lakelog`` command."""

from lakelog.cli.main import main

main()
