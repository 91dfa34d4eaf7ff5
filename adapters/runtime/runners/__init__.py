"""CLI runners (docs/contract.md, S003, S004): ``base`` (the interface), ``process`` (running a
CLI),
``claude_cli`` (the ``claude-cli`` runner), ``bash_hook`` (the bash guard as a CLI hook) and
``runtime`` (a ``RuntimeAdapter`` over a runner)."""
