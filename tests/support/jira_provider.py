"""The Jira provider wired to the fake Jira (``tests/fakes/jira/``), for the contract and the
Jira provider's own tests.

``jira_provider(fake, ...)`` builds a provider on the fake with the test token (Cloud: the
bot's e-mail and API token, Basic; Data Center: a Bearer personal access token);
``JiraHarness`` is what the work item contract takes. ``full_workflow`` gives the fake's
project a status for each of cpe's statuses (its default workflow has four: To Do, In
Progress, In Review, Done), as a team using cpe would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.providers.jira import JiraProvider, JiraSettings
from tests.fakes.jira import BOT, FakeJira

TOKEN_ENV = "CPE_TEST_JIRA_TOKEN"
EXTRA_STATUSES = (
    ("Needs Refinement", "new"),
    ("Approved", "indeterminate"),
    ("Blocked", "indeterminate"),
)


class Sleeps:
    """Stands in for ``time.sleep``: records the waits asked for, waits for none."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def full_workflow(fake: FakeJira) -> FakeJira:
    """The fake's workflow with a status for every cpe status."""
    for name, category in EXTRA_STATUSES:
        fake.add_status(name, category)
    return fake


def settings_for(fake: FakeJira, **overrides: Any) -> JiraSettings:
    values: dict[str, Any] = {
        "base_url": fake.base_url,
        "deployment": fake.deployment,
        "project": fake.project_key,
        "email": fake.email(BOT) if fake.deployment == "cloud" else None,
        "token_env": TOKEN_ENV,
        "request_timeout": 30,
    }
    return JiraSettings(**{**values, **overrides})


@contextmanager
def jira_provider(
    fake: FakeJira,
    sleeps: Callable[[float], None] | None = None,
    token: str = "test-token",
    *,
    state_dir: Path | None = None,
    clock: Callable[[], float] | None = None,
    **overrides: Any,
) -> Iterator[JiraProvider]:
    """A provider on the fake, as cpe's own user (``token``: the fake's default token)."""
    extra: dict[str, Any] = {"clock": clock} if clock is not None else {}
    with JiraProvider(
        settings_for(fake, **overrides),
        environ={TOKEN_ENV: token},
        sleep=sleeps if sleeps is not None else Sleeps(),
        state_dir=state_dir,
        **extra,
    ) as provider:
        yield provider


class JiraHarness:
    def __init__(self, fake: FakeJira, provider: JiraProvider) -> None:
        self.fake = fake
        self.provider = provider
        self.work_item_reader = provider.work_item_reader
        self.work_item_writer = provider.work_item_writer
