"""The ``wanrl-s3`` command line: ``app`` dispatches, one module per subcommand.

Each subcommand module exposes ``add_parser(subparsers)`` (which sets
``func=run``) and ``run(args) -> int``; ``app.SUBCOMMANDS`` lists them and
imports only the one chosen.
"""

from .app import main

__all__ = ["main"]
