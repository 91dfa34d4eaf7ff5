"""CLI runners (docs/contract.md, S003, S004): ``base`` (the interface), ``process`` (running a
CLI), ``claude_cli`` (the ``claude-cli`` runner), ``codex_cli`` (the ``codex-cli`` runner) and
``runtime`` (a ``RuntimeAdapter`` over a runner). The Bash guard's CLI hook is
``adapters.bash_guard.hook``."""
