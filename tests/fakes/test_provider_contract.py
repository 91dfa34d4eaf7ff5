"""The in-memory fake provider passes the work-item half of the provider contract, so the engine
tests that run on it drive something that behaves as the real providers do."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from domain.ports import WorkProviderReader, WorkProviderWriter
from tests.adapters.providers.contract import WorkItemContract
from tests.fakes.provider import fake_provider


@dataclass
class FakeHarness:
    work_item_reader: WorkProviderReader
    work_item_writer: WorkProviderWriter


class TestFakeProvider(WorkItemContract):
    @pytest.fixture
    def harness(self) -> FakeHarness:
        _, provider = fake_provider()
        return FakeHarness(provider.work_item_reader, provider.work_item_writer)
