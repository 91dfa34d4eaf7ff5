"""The composition root and the ``cpe`` command: ``parser`` (the command line and ``main``),
``app`` (building the engine, its providers and runtimes from ``supervisor.toml``), ``actions``
(what ``run``, ``init``, ``status``, ``costs``, ``replay`` do), ``runs`` (``runs list``,
``runs show`` and its ``--follow``), ``common`` (what the commands share), ``work`` (the work
commands and a person's requests) and ``demo`` (``cpe demo``)."""

from adapters.cli.parser import main

__all__ = ["main"]
