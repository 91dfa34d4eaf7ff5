"""The work item contract, run against the Linear provider and the fake Linear (a tracker only:
no revisions), with the team's workflow holding a state for each of cpe's statuses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.providers.contract import WorkItemContract
from tests.fakes.linear.fake import FakeLinear
from tests.support.linear_provider import LinearHarness, linear_provider, with_cpe_states


class TestLinearWorkItems(WorkItemContract):
    @pytest.fixture
    def harness(self, fake_linear: FakeLinear) -> Iterator[LinearHarness]:
        with linear_provider(with_cpe_states(fake_linear)) as provider:
            yield LinearHarness(fake_linear, provider)
