"""The ``lakelog`` command, in the style of Kafka's tools (layer 5).

:mod:`lakelog.cli.main` is the typer app and the console script's entry point; each command group lives in
its own module (``processes``, ``topics``, ``records``, ``groups``, ``producers``, ``transactions``, ``acls``,
``users``, ``quotas``, ``jobs``), sharing ``common``. ``python -m lakelog.cli`` runs the command.
"""
