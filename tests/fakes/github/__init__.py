"""A stateful fake GitHub for the GitHub provider's tests and benchmark (see ``fake.py``)."""

from tests.fakes.github.fake import FakeGitHub
from tests.fakes.github.records import Fault, RecordedRequest

__all__ = ["FakeGitHub", "Fault", "RecordedRequest"]
