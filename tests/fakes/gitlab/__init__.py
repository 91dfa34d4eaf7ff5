"""A stateful fake GitLab for the GitLab provider's tests, the end-to-end loop and its own
tests (see ``fake.py``)."""

from tests.fakes.gitlab.fake import TEAMMATE, FakeGitLab
from tests.fakes.gitlab.records import RecordedRequest, Token
from tests.fakes.http import Fault, Stall

__all__ = ["TEAMMATE", "FakeGitLab", "Fault", "RecordedRequest", "Stall", "Token"]
