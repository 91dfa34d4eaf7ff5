"""Helpers and fixtures the tests share: real git repositories (``git``), the fake GitHub
started for a test (``github``) and the fake ``claude`` and ``codex`` CLIs (``clis``).

The fakes themselves live in ``tests/fakes/``; this package is what starts them for a test.
``tests/conftest.py`` registers the fixture modules as plugins, so a test asks for
``fake_github``, ``fake_claude`` or ``fake_codex`` by name.
"""
