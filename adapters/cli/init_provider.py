"""``cpe init --tracker T --forge F``: the ``[provider]`` part of the ``supervisor.toml`` it
writes for the pair, the repository or project guessed from the clone's ``origin`` where it can
be, and what is left for a person to set (the token variables and what each token needs, the
repository or project that could not be guessed; Linear's team, Jira's site, project and
e-mail, which ``origin`` never says)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from adapters.cli.provider_settings import (
    FORGES,
    NAMES,
    PLACEHOLDERS,
    TRACKERS_ONLY,
    ProviderKind,
    pair_refusal,
)

PLACEHOLDER = {
    "github": PLACEHOLDERS["github", "repository"][0],
    "gitlab": PLACEHOLDERS["gitlab", "project"][0],
}
TOKEN_ENV = {
    "github": "GITHUB_TOKEN",
    "gitlab": "GITLAB_TOKEN",
    "linear": "LINEAR_API_KEY",
    "jira": "JIRA_API_TOKEN",
}
PUBLIC = {"github": "https://api.github.com/", "gitlab": "https://gitlab.com"}  # base_url defaults
ELSEWHERE = {
    "github": "GitHub Enterprise: https://HOST/api/v3/",
    "gitlab": "a self-managed instance: its URL",
}
# What a token needs, by system and by the roles it serves (docs/github.md, docs/configuration.md).
NEEDS = {
    ("github", "both"): "a classic token with the repo scope, or a fine-grained one with "
    "Contents, Issues and Pull requests read and write, Commit statuses read",
    ("github", "work_items"): "a classic token with the repo scope (public_repo for a public "
    "repository), or a fine-grained one with Issues read and write",
    ("github", "revisions"): "a classic token with the repo scope, or a fine-grained one with "
    "Contents and Pull requests read and write, Commit statuses read",
    ("gitlab", "both"): "a personal, project or group access token with the api scope, of a "
    "member with at least the Developer role, and one the default branch's protection allows "
    "to merge (Maintainer by default)",
    ("gitlab", "work_items"): "a personal, project or group access token with the api scope, "
    "of a member with at least the Reporter role",
    ("gitlab", "revisions"): "a personal, project or group access token with the api scope, of "
    "a member with at least the Developer role, and one the default branch's protection "
    "allows to merge (Maintainer by default)",
    ("linear", "work_items"): "a personal API key (Linear: Settings, Security & access) or an "
    "OAuth access token, of a member of the team (not a guest) who can create and edit its "
    "issues",
    ("jira", "work_items"): "Jira Cloud: an API token (id.atlassian.com, Security, API tokens) "
    "of the account whose email is set, with the Browse projects, Create issues, Edit issues, "
    "Transition issues, Link issues and Add comments permissions in the project; Jira Data "
    "Center: a personal access token of an account with those permissions",
}
# The settings of a tracker-only system that origin never says: each with its placeholder (the
# file loads with it) and what it is; then its options, commented out; then what is left to set.
TRACKER_KEYS: dict[str, list[tuple[str, str, str]]] = {
    "linear": [("team", "ENG", "set it: the team's key (ENG-12's ENG)")],
    "jira": [
        ("base_url", PLACEHOLDERS["jira", "base_url"][0], "set it: the site, or Data Center's URL"),
        ("project", "PROJ", "set it: the project's key (PROJ-12's PROJ)"),
        ("email", PLACEHOLDERS["jira", "email"][0], "set it: the token's account (Cloud only)"),
    ],
}
TRACKER_OPTIONS = {
    "linear": [
        ('# project = "NAME"', "only the issues of this project (its name or id)"),
        ('# label = "cpe"', "only the issues with this label"),
    ],
    "jira": [
        ('# jql = "project = PROJ"', "which issues are work (default: the project's)"),
        ('# deployment = "cloud"', "or data_center (default: by the site's host)"),
    ],
}
# The mapping of cpe's statuses, commented out: the names the provider looks for unmapped.
TRACKER_STATUSES = {
    "linear": [
        "# [provider.linear.states]     # cpe status = a state of the team's, a different one each",
        '# needs-refinement = "Needs Refinement"',
        '# approved = "Approved"',
        '# blocked = "Blocked"',
    ],
    "jira": [
        "# [provider.jira.statuses]     # cpe status = a workflow status, a different one each",
        '# in-review = "In Review"',
        '# needs-refinement = "Needs Refinement"',
        '# approved = "Approved"',
        '# blocked = "Blocked"',
    ],
}
# What the tracker's workflow needs, as a person is told it after cpe init.
TRACKER_WORKFLOW = {
    "linear": "the team's workflow needs a state for each of cpe's statuses (a default team "
    "lacks Needs Refinement, Approved and Blocked): add them, or name states of yours in "
    "[provider.linear.states], a different one each (docs/linear.md)",
    "jira": "the project's workflow needs a status for each of cpe's statuses (Jira's default "
    "one has To Do, In Progress and Done): add In Review, Needs Refinement, Approved and "
    "Blocked, or name statuses of yours in [provider.jira.statuses], a different one each "
    "(docs/jira.md)",
}
TRACKER_LEFT = {
    "linear": "the key of the Linear team whose issues are the work items",
    "jira": "your Jira site (Cloud: https://SITE.atlassian.net) or Data Center's URL, the "
    "project's key, and on Cloud the e-mail of the token's account (remove email on Data Center)",
}
_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?P<path>[^/].*)$")  # git@host:group/name.git
_URL = re.compile(r"^[a-z+]+://(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?/(?P<path>.+)$")


def pair_problem(tracker: ProviderKind, forge: ProviderKind) -> str | None:
    """Why ``--tracker``/``--forge`` is no valid pair, in one line (None: it is one)."""
    refused = pair_refusal(tracker, forge, "--forge")
    if refused is None:
        return None
    if forge in TRACKERS_ONLY:
        return (
            f"--forge {forge}: {NAMES[forge]} keeps work items only; choose "
            f"{', '.join(FORGES)} or local for --forge"
        )
    return (
        f"--forge {forge}: the local forge keeps revisions of the local tracker's, Linear's or "
        f"Jira's items; with work items on {tracker} choose {' or '.join(FORGES)} for --forge"
    )


def default_forge(tracker: ProviderKind) -> ProviderKind:
    """The forge when ``--forge`` is not given: the tracker's own system, the local one for a
    tracker that keeps no revisions (Linear, Jira)."""
    return "local" if tracker in TRACKERS_ONLY else tracker


def origin_of(root: Path) -> tuple[str, str] | None:
    """The host and the path (``group/name``, no ``.git``) of the clone's ``origin``."""
    found = subprocess.run(
        ["git", "-C", str(root), "remote", "get-url", "origin"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if found.returncode != 0:
        return None
    url = found.stdout.strip()
    match = _URL.match(url) or _SCP.match(url)
    if match is None:
        return None
    host = match.group(1) if match.re is _SCP else match.group("host")
    path = match.group("path").rstrip("/").removesuffix(".git")
    return host.lower(), path


@dataclass
class ProviderText:
    """The ``[provider]`` text for a pair and what is left to set."""

    text: str
    pair: str = ""
    left: list[str] = field(default_factory=list)
    guessed: list[str] = field(default_factory=list)


def provider_text(
    tracker: ProviderKind, forge: ProviderKind, origin: tuple[str, str] | None
) -> ProviderText:
    """``[provider]`` for the pair: one ``kind`` when one system serves both, else the two role
    sections; then each remote system's section. ``origin`` is where the code lives, the
    forge: its repository or project is guessed from it (the tracker's too when it is the same
    system); anything not guessed is a placeholder the file loads with, and ``left`` says so."""
    out = ProviderText("", f"work items on {tracker} and revisions on {forge}")
    lines = [
        "[provider]",
        f"# cpe init --tracker {tracker} --forge {forge}. Valid pairs: any tracker (local,",
        "# github, gitlab, linear, jira) with revisions on github or gitlab; revisions on local",
        "# with work items on local, linear or jira.",
    ]
    if tracker == forge:
        lines.append(_commented(f'kind = "{tracker}"', "work items and revisions"))
    else:
        lines += [
            "[provider.work_items]",
            _commented(
                f'kind = "{tracker}"', "the tracker: local | github | gitlab | linear | jira"
            ),
            "[provider.revisions]",
            _commented(f'kind = "{forge}"', "the forge: github | gitlab | local"),
        ]
    for kind in dict.fromkeys((tracker, forge)):
        roles = "both" if tracker == forge else "work_items" if kind == tracker else "revisions"
        if kind == "local":  # the local forge's pipeline (the tracker alone has no settings)
            lines += ["", *_LOCAL] if forge == "local" else []
        elif kind in TRACKERS_ONLY:
            lines += ["", *_tracker_only(kind, out)]
        else:
            lines += ["", *_remote(kind, roles, origin if kind == forge else None, out)]
    out.text = "\n".join(lines) + "\n"
    return out


_LOCAL = [
    "[provider.local]",
    "# The local pipeline: run on each revision's head in a throwaway worktree. An empty list",
    "# means no CI: a revision is reviewed as soon as it exists.",
    'pipeline_command = ["python3", "-m", "pytest", "-q"]',
    "pipeline_timeout = 900         # seconds",
    "baseline = true                # run it on the default branch's head too",
]


def _remote(
    kind: ProviderKind, roles: str, origin: tuple[str, str] | None, out: ProviderText
) -> list[str]:
    name, where = NAMES[kind], PLACEHOLDER[kind]
    base_url = None
    guessed = _guess(kind, origin)
    if guessed is not None:
        where, base_url = guessed
    variable = TOKEN_ENV[kind]
    key = "repository" if kind == "github" else "project"
    lines = [f"[provider.{kind}]"]
    note = "guessed from origin" if guessed is not None else "not guessed: set it"
    lines.append(_commented(f'{key} = "{where}"', note))
    if base_url is not None:
        lines.append(_commented(f'base_url = "{base_url}"', "guessed from origin"))
    elif guessed is None:  # said, so that a self-managed instance's URL has its place
        lines.append(_commented(f'base_url = "{PUBLIC[kind]}"', ELSEWHERE[kind]))
    lines.append(_commented(f'token_env = "{variable}"', "the NAME of the variable, not the token"))
    if guessed is not None:
        out.guessed.append(f'[provider.{kind}] {key} = "{where}"')
    else:
        out.left.append(
            f"set [provider.{kind}] {key} in supervisor.toml (now {where}), and base_url when "
            f"not on {PUBLIC[kind]}: the {name} {key} was not guessed from origin"
        )
    out.left.append(f"export {variable}=...   {NEEDS[kind, roles]}")
    return lines


def _tracker_only(kind: ProviderKind, out: ProviderText) -> list[str]:
    """Linear's or Jira's section: placeholders for what origin cannot say, its options
    commented out, the token variable; and what is left to set."""
    keys = TRACKER_KEYS[kind]
    lines = [f"[provider.{kind}]"]
    lines += [_commented(f'{key} = "{value}"', what) for key, value, what in keys]
    lines += [_commented(line, what) for line, what in TRACKER_OPTIONS[kind]]
    variable = TOKEN_ENV[kind]
    lines.append(_commented(f'token_env = "{variable}"', "the NAME of the variable, not the token"))
    lines += TRACKER_STATUSES[kind]
    names = [key for key, _, _ in keys]
    named = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    now = ", ".join(value for _, value, _ in keys)
    out.left.append(
        f"set [provider.{kind}] {named} in supervisor.toml (now {now}): {TRACKER_LEFT[kind]}"
    )
    out.left.append(f"export {variable}=...   {NEEDS[kind, 'work_items']}")
    out.left.append(TRACKER_WORKFLOW[kind])
    return lines


def _commented(line: str, comment: str) -> str:
    """A line with its comment at the column the shipped file uses."""
    return f"{line:<30} # {comment}"


def _guess(kind: ProviderKind, origin: tuple[str, str] | None) -> tuple[str, str | None] | None:
    """The repository or project, and the base URL when not the public instance's, that
    ``origin`` names for ``kind``; None when it names another system's, or nothing usable."""
    if origin is None:
        return None
    host, path = origin
    if kind == "github":
        if "gitlab" in host or not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", path):
            return None
        return path, None if host == "github.com" else f"https://{host}/api/v3/"
    if host == "github.com" or not re.fullmatch(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+", path):
        return None
    return path, None if host == "gitlab.com" else f"https://{host}"


def with_provider(default: str, provider: str) -> str:
    """The shipped ``supervisor.toml`` with its ``[provider]`` part (up to ``[specs]``)
    replaced by ``provider``."""
    start = default.index("\n[provider]\n") + 1
    end = default.index("\n[specs]\n") + 1
    return default[:start] + provider + "\n" + default[end:]
