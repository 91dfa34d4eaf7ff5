"""The codex vendor (docs/contract.md, S003-10, S004-10): the ``codex exec`` runner and its
runtime (``runner``), what a run's events and end mean (``run``), the run's own ``CODEX_HOME``
(``home``), a sandbox that could not run commands (``sandbox``), what codex says of the model
API (``signals``), the ``codex-cli`` kind's settings (``settings``: ``CodexCliRuntime``). It
imports what every CLI shares from ``adapters.runtime.cli``, never from another vendor."""
