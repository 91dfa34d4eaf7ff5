"""A stateful fake GitHub for the GitHub provider's tests and benchmark (see ``fake.py``)."""

from tests.fakes.github.app import FakeApp, ManualClock, TokenGrant, rsa_key_pair
from tests.fakes.github.fake import FakeGitHub
from tests.fakes.github.records import RecordedRequest
from tests.fakes.http import Fault, Stall

__all__ = [
    "FakeApp",
    "FakeGitHub",
    "Fault",
    "ManualClock",
    "RecordedRequest",
    "Stall",
    "TokenGrant",
    "rsa_key_pair",
]
