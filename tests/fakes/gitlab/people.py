"""Who is who on the fake GitLab's project: the accounts that exist (each with a numeric id), the
project's members with their access levels, and what GitLab lets each do.

The project is public: anyone signed in can read it, open issues and comment; what takes a role
(GitLab's permissions table) is checked against ``level``:

- Reporter (20) and up set an issue's labels (on create or edit: a stranger's labels are dropped
  without a word, as GitLab drops them), create labels, and edit or close anyone's issue; an
  author edits and closes their own.
- Developer (30) and up push branches, create merge requests from them, report commit
  statuses and approve merge requests (an author not their own: the project's default);
  Maintainer (40) and up push to and merge into the protected default branch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.fakes.gitlab.records import ACCESS_LEVELS


def level(name: str | int) -> int:
    """An access level by name (``developer``) or number (30); anything else is a mistake."""
    if isinstance(name, int):
        if name not in ACCESS_LEVELS.values():
            raise ValueError(
                f"no access level {name}: GitLab's are {sorted(ACCESS_LEVELS.values())}"
            )
        return name
    if name not in ACCESS_LEVELS:
        raise ValueError(f"no access level {name!r}: GitLab's are {', '.join(ACCESS_LEVELS)}")
    return ACCESS_LEVELS[name]


@dataclass
class People:
    """The accounts (``ids`` by username, as GitLab spells them) and the project's ``members``
    (username -> access level). Usernames match ignoring case, as on GitLab."""

    ids: dict[str, int] = field(default_factory=dict)
    members: dict[str, int] = field(default_factory=dict)
    bots: set[str] = field(default_factory=set)

    def seen(self, username: str) -> str:
        """``username`` has an account from now on (its spelling kept); returns it."""
        known = self.find(username)
        if known is not None:
            return known
        self.ids[username] = 1000 + len(self.ids) * 11
        return username

    def find(self, username: str) -> str | None:
        folded = username.casefold()
        return next((u for u in self.ids if u.casefold() == folded), None)

    def by_id(self, user_id: int) -> str | None:
        return next((u for u, i in self.ids.items() if i == user_id), None)

    def id(self, username: str) -> int:
        return self.ids[self.seen(username)]

    def level(self, username: str | None) -> int:
        """``username``'s access level on the project; 0 for a non-member (or anonymous)."""
        if username is None:
            return 0
        return self.members.get(self.find(username) or username, 0)
