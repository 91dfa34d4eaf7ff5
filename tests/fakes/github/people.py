"""Who is who on the fake's repository: its owner, collaborators and organization members with
their roles, the accounts that exist, and what GitHub makes of a person from that.

The repository is public: anyone can read it and open issues, so a stranger (no role) still
files issues, reviews and comments. What GitHub tells of each person, and the fake with it:

- ``author_association`` on issues, pull requests, reviews and review comments, judged when
  read (a collaborator added later shows on old comments too): ``OWNER`` the repository's owner,
  ``MEMBER`` a member of its organization, ``COLLABORATOR`` any collaborator whatever the role,
  ``CONTRIBUTOR`` someone with a pull request merged here, ``FIRST_TIME_CONTRIBUTOR`` someone
  with a pull request here none of which is merged yet, ``NONE`` anyone else. ``FIRST_TIMER``
  (never committed anywhere on GitHub) needs a world the fake does not have: never given.
- ``GET /repos/{owner}/{repo}/collaborators/{username}/permission``: ``permission`` the legacy
  base role (admin, write, read, none: maintain reads as write, triage as read), ``role_name``
  the role itself. On a public repository a stranger reads ``read``; an App's bot, no user of
  the repository, ``none``; a login no account has is a 404 (``<login> is not a user``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tests.fakes.github.records import ROLES, Role

# ``permission`` of the permission endpoint for each role (GitHub's legacy base roles).
BASE_PERMISSION: Mapping[str, str] = MappingProxyType(
    {"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read"}
)
RANK: Mapping[str, int] = MappingProxyType({role: n for n, role in enumerate(ROLES, start=1)})
STRANGER_ROLE = "read"  # what anyone has on a public repository


def role(name: str) -> Role:
    """A repository role by name; anything else is a mistake in the test."""
    if name not in ROLES:
        raise ValueError(f"no repository role {name!r}: GitHub's are {', '.join(ROLES)}")
    return name


def flags(name: str | None) -> dict[str, bool]:
    """The ``permissions`` hash of a collaborator object: each role the given one includes."""
    rank = RANK.get(name or "", 0)
    keys = {"read": "pull", "triage": "triage", "write": "push", "maintain": "maintain"}
    return {keys.get(r, r): RANK[r] <= rank for r in ROLES}


@dataclass
class People:
    """The repository's people. ``collaborators`` and ``members`` map a login to its role;
    ``users`` are the accounts that exist (every login the fake has seen or been told of);
    ``bots`` the Apps' bots acting here. Logins are matched as GitHub matches them: ignoring
    case."""

    owner: str
    collaborators: dict[str, Role] = field(default_factory=dict)
    members: dict[str, Role] = field(default_factory=dict)
    users: set[str] = field(default_factory=set)
    bots: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.users.add(self.owner)

    def login(self, name: str) -> str | None:
        """The account ``name`` names (its own spelling), None when no account has it."""
        folded = name.casefold()
        return next((u for u in self.users | self.bots if u.casefold() == folded), None)

    def seen(self, login: str) -> str:
        """``login`` acted here: an account that exists from now on."""
        if login.endswith("[bot]"):
            self.bots.add(login)
        else:
            self.users.add(login)
        return login

    def role(self, login: str) -> Role | None:
        """``login``'s role on the repository, None for a stranger (or a bot)."""
        if login == self.owner:
            return "admin"  # it owns the repository
        held = (self.collaborators.get(login), self.members.get(login))
        granted: list[Role] = [r for r in held if r is not None]
        return max(granted, key=lambda r: RANK[r], default=None)

    def permission(self, login: str) -> tuple[str, str] | None:
        """(``permission``, ``role_name``) as the permission endpoint gives them; None for a
        login no account has."""
        found = self.login(login)
        if found is None:
            return None
        if found in self.bots:
            return "none", "none"
        name = self.role(found) or STRANGER_ROLE
        return BASE_PERMISSION[name], name

    def association(self, login: str, merged: set[str], opened: set[str]) -> str:
        """``author_association`` of ``login``: ``merged`` are the authors of merged pull
        requests, ``opened`` of any pull request."""
        if login == self.owner:
            return "OWNER"
        if login in self.members:
            return "MEMBER"
        if login in self.collaborators:
            return "COLLABORATOR"
        if login in merged:
            return "CONTRIBUTOR"
        if login in opened:
            return "FIRST_TIME_CONTRIBUTOR"
        return "NONE"
