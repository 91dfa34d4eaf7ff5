"""The GitLab provider's forge side, put together: merge requests as revisions.

``build_forge`` makes the revision reader and writer over one ``MrIndex`` (what the writer makes
is what the next read sees) and gives the index too: when the provider also serves the work
items, the tracker links each item to its revision through ``MrIndex.linked_revisions``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from adapters.providers.gitlab.api import GitLabApi, Json
from adapters.providers.gitlab.commits import Repository
from adapters.providers.gitlab.merge_requests import MrIndex, Trusted
from adapters.providers.gitlab.pipeline import PipelineReader
from adapters.providers.gitlab.revisions import GitLabRevisionReader, GitLabRevisionWriter
from adapters.providers.gitlab.settings import GitLabSettings


class PeopleTrust(Protocol):
    def trusted(self, user_id: int | None, username: str | None = None) -> bool: ...


def trusted_authors(trust: PeopleTrust) -> Trusted:
    """Whether the author of a note or merge request (a user as GitLab embeds one) is
    trusted, by ``trust``'s judgement of the person."""

    def trusted(author: Json | None) -> bool:
        if not author:
            return False
        user_id = author.get("id")
        username = author.get("username")
        return trust.trusted(
            user_id if isinstance(user_id, int) else None,
            username if isinstance(username, str) else None,
        )

    return trusted


@dataclass(frozen=True)
class Forge:
    reader: GitLabRevisionReader
    writer: GitLabRevisionWriter
    merge_requests: MrIndex


def build_forge(
    api: GitLabApi,
    settings: GitLabSettings,
    default_branch: str,
    trust: PeopleTrust,
    *,
    closing: bool,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Forge:
    """The forge of one project. ``closing``: the tracker is this project's own issues (a
    revision says "Closes #N"); false with a tracker elsewhere (the neutral marker)."""
    trusted = trusted_authors(trust)
    repository = Repository(api)
    pipelines = PipelineReader(api)
    mrs = MrIndex(api, settings, default_branch, pipelines, trusted, closing=closing)
    return Forge(
        reader=GitLabRevisionReader(
            api, mrs, repository, default_branch, pipelines, trusted=trusted
        ),
        writer=GitLabRevisionWriter(
            api, mrs, repository, default_branch, closing=closing, sleep=sleep, clock=clock
        ),
        merge_requests=mrs,
    )
