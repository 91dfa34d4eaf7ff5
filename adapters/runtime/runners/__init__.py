"""The vendors' CLI runners (docs/contract.md, S003, S004): ``claude_cli`` (the ``claude-cli``
runner) and ``codex_cli`` (the ``codex-cli`` runner), on what every CLI shares
(``adapters.runtime.cli``). The Bash guard's CLI hook is ``adapters.bash_guard.hook``."""
