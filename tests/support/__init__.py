"""Helpers and fixtures the tests share: real git repositories (``git``), the fake GitHub
started for a test (``github``) and the fake ``claude`` and ``codex`` CLIs (``clis``).

The fakes themselves live in ``tests/fakes/``; this package is what starts them for a test.
A directory's ``conftest.py`` re-exports the fixtures its tests use (``fake_github``,
``fake_claude``, ``fake_codex``), so they stay next to the tests that use them.
"""
