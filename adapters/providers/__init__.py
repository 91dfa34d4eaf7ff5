"""Everything behind the provider ports (``domain.ports``): one package per tracker or forge.

``local/`` (the embedded SQLite tracker, revisions as git branches, a local pipeline),
``github/`` (issues and pull requests through githubkit), ``gitlab/`` (issues and merge requests
through python-gitlab), ``linear/`` and ``jira/`` (work items only, over httpx) and ``specs/``
(spec files read from git), with the modules they share beside them (``git.py``,
``git_conflicts.py``, ``markers.py``, ``pacing.py``…). A provider
package imports only these shared modules, ``domain/`` and neutral modules, never another
provider's package (``tests/adapters/providers/test_isolation.py``); a new tracker or forge is one
package beside them, held to the same contract suite (``tests/adapters/providers/contract.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderRoles:
    """What one provider serves: the work items (its tracker), the revisions (its forge), or
    both. ``supervisor.toml`` may take them from two systems (``[provider.work_items]`` and
    ``[provider.revisions]``); each provider then builds only the side it serves, and writes
    nothing on the other (no status labels on a forge-only repository)."""

    work_items: bool = True
    revisions: bool = True

    def __post_init__(self) -> None:
        if not (self.work_items or self.revisions):
            raise ValueError("a provider serves work items, revisions or both")

    @property
    def both(self) -> bool:
        return self.work_items and self.revisions

    @property
    def foreign_tracker(self) -> bool:
        """Revisions here, work items in another system: a revision names its work item with
        ``markers.work_item_reference``, never with a closing reference to this forge's own
        issues."""
        return self.revisions and not self.work_items
