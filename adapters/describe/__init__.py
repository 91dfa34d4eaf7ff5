"""The engine's state in words, as the ``cpe`` command and the dashboard both show it: a run's
line (``runs``), a work item's sections (``items``), the merge queue (``landing``). Narrow
settings in, lines of text out; nothing from ``adapters/cli/`` (the composition root imports
these, never the other way)."""
