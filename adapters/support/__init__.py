"""Hooks every layer may import: the crash suite's crashpoints, the redaction of what cpe shows,
and the per-repository lock on git worktrees that the runtime and the providers share.

A leaf: nothing here imports ``domain/``, ``actors/`` or the rest of ``adapters/``
(``tests/adapters/support/test_leaf.py``), so ``actors/`` may import it — the one arrow from
``actors/`` into ``adapters/`` — as well as every adapter.
"""
