"""``cpe webhooks``: how to register each provider's webhook with its vendor, from
``supervisor.toml``: the URL to give (``[webhooks] listen``'s, else the dashboard's), where the
vendor takes it, the content type, the events to select, the variable holding the secret and
whether it is set (never its value), and how to test it. docs/webhooks.md says the same at
length."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from adapters.cli.common import fail
from adapters.cli.repository import resolve_config
from adapters.cli.settings import CpeConfig
from adapters.host.webhooks.settings import SECRET_KEYS
from adapters.host.webhooks.verify import VENDORS, Vendor
from adapters.support.addresses import is_loopback
from domain.errors import ConfigError

NAMES: dict[Vendor, str] = {
    "github": "GitHub",
    "gitlab": "GitLab",
    "linear": "Linear",
    "jira": "Jira",
}
# The events to select, by the role the vendor plays (the tracker's work items, the forge's
# revisions): what adapters/host/webhooks/verify.py maps to a poll.
EVENTS: dict[Vendor, dict[str, tuple[str, ...]]] = {
    "github": {
        "work_items": ("Issues", "Issue comments"),
        "revisions": (
            "Pull requests",
            "Pull request reviews",
            "Pull request review comments",
            "Check runs",
            "Check suites",
            "Statuses",
            "Pushes",
            "Issue comments",
        ),
    },
    "gitlab": {
        "work_items": ("Issues events", "Confidential issues events", "Comments"),
        "revisions": ("Merge request events", "Pipeline events", "Push events", "Comments"),
    },
    "linear": {"work_items": ("Issues", "Comments", "Issue labels")},
    "jira": {
        "work_items": ("Issue: created, updated, deleted", "Comment: created, updated, deleted")
    },
}
TESTS: dict[Vendor, str] = {
    "github": "GitHub sends a ping when the hook is made: cpe answers 200 and polls nothing; "
    "the hook's Recent Deliveries shows each answer, and Redeliver resends one",
    "gitlab": "the hook's Test button sends an event: cpe answers 202 and polls; Recent "
    "events shows each answer",
    "linear": "change an issue of the team: cpe answers 200 and polls (Linear takes only a "
    "public HTTPS URL and retries a failure after 1 min, 1 h, 6 h)",
    "jira": "change an issue of the project: cpe answers 202 and polls",
}


def webhooks(config_path: Path | None, repo: Path | None, out: TextIO | None = None) -> int:
    try:
        config, _ = resolve_config(config_path, repo)
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    print(describe(config, os.environ), file=out)
    return 0


def describe(config: CpeConfig, environ: Mapping[str, str]) -> str:
    section = config.webhooks
    provider = config.provider
    roles: dict[Vendor, list[str]] = {}
    for role, kind in (
        ("work_items", provider.work_items_kind),
        ("revisions", provider.revisions_kind),
    ):
        if kind != "local":
            roles.setdefault(kind, []).append(role)
    configured = section.env_names()
    base, where = _base(config)
    lines = [
        "Webhooks make cpe poll at once what a vendor says changed; polling goes on at its",
        "interval all the same (a missed delivery costs latency, never correctness).",
        "docs/webhooks.md",
        "",
    ]
    if not roles:
        lines.append(
            "The provider is local: it has no vendor to send webhooks (nothing to register)."
        )
    for vendor in VENDORS:
        if vendor not in roles and vendor not in configured:
            continue
        played = roles.get(vendor, [])
        what = " and ".join(
            {"work_items": "the tracker", "revisions": "the forge"}[role] for role in played
        )
        lines.append(f"{NAMES[vendor]} ({what or 'neither the tracker nor the forge here'})")
        key = SECRET_KEYS[vendor]
        name = configured.get(vendor)
        if name is None:
            lines.append(
                f'  not configured: set [webhooks] {key} = "NAME" in supervisor.toml, and the '
                "hook's secret in the environment variable NAME"
            )
            lines.append("")
            continue
        url = f"{base}/hooks/{vendor}" if base else None
        lines.append(f"  URL           {url or 'nothing serves the hooks: set [webhooks] listen'}")
        if url:
            lines.append(f"                ({where})")
        lines.append(f"  register at   {_register_at(config, vendor)}")
        lines.append("  content type  application/json")
        state = "set" if environ.get(name) else "NOT SET: cpe run refuses to start"
        lines.append(f"  secret        ${name} ({state})")
        events = list(dict.fromkeys(e for role in played for e in EVENTS[vendor].get(role, ())))
        lines.append(f"  events        {', '.join(events) or 'none cpe reads'}")
        lines.append(f"  test          {TESTS[vendor]}")
        lines.append("")
    return "\n".join(lines).rstrip()


def _base(config: CpeConfig) -> tuple[str | None, str]:
    """The URL the hooks are served under (None: nothing serves them), and what to know of it."""
    listen = config.webhooks.listen or config.dashboard.listen
    if not listen:
        return None, ""
    host, _, port_text = listen.rpartition(":")
    host, port = host.removeprefix("[").removesuffix("]"), int(port_text)
    shown_port = str(port) if port else "PORT"
    own = bool(config.webhooks.listen)
    serves = "[webhooks] listen, /hooks/* only" if own else "the dashboard's address"
    if port == 0:
        serves += "; port 0: the free port taken is logged at start (webhooks listening)"
    if host in {"0.0.0.0", "::"}:
        return f"http://THIS-HOST:{shown_port}", serves + "; every interface of this machine"
    shown = f"[{host}]" if ":" in host else host
    if is_loopback(host):
        serves += (
            "; loopback: a vendor reaches it only through a reverse proxy or a tunnel that "
            "passes the body unchanged (its public HTTPS URL + /hooks/...)"
        )
    return f"http://{shown}:{shown_port}", serves


def _register_at(config: CpeConfig, vendor: Vendor) -> str:
    provider = config.provider
    if vendor == "github" and provider.github is not None:
        if provider.github.base_url.rstrip("/") == "https://api.github.com":
            return f"https://github.com/{provider.github.repository}/settings/hooks/new"
        return f"the repository {provider.github.repository}'s Settings > Webhooks > Add webhook"
    if vendor == "gitlab" and provider.gitlab is not None:
        base = provider.gitlab.base_url.rstrip("/")
        return f"{base}/{provider.gitlab.project}/-/hooks (Settings > Webhooks)"
    if vendor == "linear":
        return "Linear: Settings > API > Webhooks > New webhook (a workspace admin)"
    if vendor == "jira" and provider.jira is not None:
        base = provider.jira.base_url.rstrip("/")
        return f"{base}/plugins/servlet/webhooks (a Jira admin: System > WebHooks; its Secret)"
    return f"the {NAMES[vendor]} settings of the project"
