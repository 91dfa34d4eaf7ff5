"""The Linear provider wired to the fake Linear (``tests/fakes/linear/``, started by
``tests/support/linear.py``), for the contract and the Linear provider's own tests.

``linear_provider(fake_linear, ...)`` builds a provider on the fake with the bot's API key;
``LinearHarness`` is what the work item contract (``tests/adapters/providers/contract.py``)
takes. ``with_cpe_states`` gives the fake's team the states cpe's statuses need beyond Linear's
default workflow (Approved, Needs Refinement, Blocked), as docs/linear.md tells a team to.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.providers.linear import LinearProvider, LinearSettings
from tests.fakes.linear.fake import API_KEY, FakeLinear
from tests.support.linear import TOKEN_ENV

CPE_STATES = (("Approved", "started"), ("Needs Refinement", "unstarted"), ("Blocked", "backlog"))


class Sleeps:
    """Stands in for ``time.sleep``: records the waits asked for, waits for none."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def with_cpe_states(fake_linear: FakeLinear) -> FakeLinear:
    for name, kind in CPE_STATES:
        fake_linear.add_state(name, kind)
    return fake_linear


def settings_for(fake_linear: FakeLinear, **overrides: Any) -> LinearSettings:
    values: dict[str, Any] = {
        "team": fake_linear.team_key,
        "api_url": fake_linear.url,
        "token_env": TOKEN_ENV,
        "request_timeout": 30,
    }
    return LinearSettings(**{**values, **overrides})


@contextmanager
def linear_provider(
    fake_linear: FakeLinear,
    sleeps: Sleeps | None = None,
    token: str = API_KEY,
    *,
    state_dir: Path | None = None,
    clock: Any = None,
    **overrides: Any,
) -> Iterator[LinearProvider]:
    """A provider on the fake, as cpe's own user (``token``: the bot's API key)."""
    extra: dict[str, Any] = {"clock": clock} if clock is not None else {}
    with LinearProvider(
        settings_for(fake_linear, **overrides),
        environ={TOKEN_ENV: token},
        sleep=sleeps if sleeps is not None else Sleeps(),
        state_dir=state_dir,
        **extra,
    ) as provider:
        yield provider


class LinearHarness:
    def __init__(self, fake_linear: FakeLinear, provider: LinearProvider) -> None:
        self.fake_linear = fake_linear
        self.provider = provider
        self.work_item_reader = provider.work_item_reader
        self.work_item_writer = provider.work_item_writer
