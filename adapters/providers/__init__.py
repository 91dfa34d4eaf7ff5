"""Everything behind the provider ports (``domain.ports``): one package per tracker or forge.

``local/`` (the embedded SQLite tracker, revisions as git branches, a local pipeline),
``github/`` (issues and pull requests through githubkit) and ``specs/`` (spec files read from
git), with the git plumbing they share beside them (``git.py``, ``git_conflicts.py``). A provider
package imports only these shared modules, ``domain/`` and neutral modules, never another
provider's package (``tests/adapters/providers/test_isolation.py``); a new tracker or forge is one
package beside them, held to the same contract suite (``tests/adapters/providers/contract.py``).
"""
