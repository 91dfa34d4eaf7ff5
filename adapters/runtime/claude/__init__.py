"""The Claude vendor (docs/contract.md, S001, S003-09): the Agent SDK runtime (``sdk``, with a
run's state in ``sdk_run``), the ``claude -p`` runner and its runtime (``cli_runner``), what its
CLI says of the model API (``signals``), its bundled CLI and model variables (``vendor``), the
two kinds' settings (``settings``: ``ClaudeSdkRuntime``, ``ClaudeCliRuntime``). It imports
what every CLI shares from ``adapters.runtime.cli``, never from another vendor."""
