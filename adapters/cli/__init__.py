"""The composition root and the ``cpe`` command: ``command`` (``main``), ``parser`` (the
command line), ``app`` (building the engine, its providers and runtimes from
``supervisor.toml``), then one module per subcommand: ``run``, ``init``, ``status``, ``runs``
(``runs list``, ``runs show`` and its ``--follow``), ``work`` (the work commands and a
person's requests), ``costs``, ``replay``, ``demo`` (``cpe demo``) and ``scripted``
(``cpe scripted-model``); ``common`` holds what they share."""

from adapters.cli.command import main

__all__ = ["main"]
