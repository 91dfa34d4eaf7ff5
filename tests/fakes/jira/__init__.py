"""A stateful fake Jira (Cloud and Data Center) for the Jira provider's tests, the end-to-end
loop and its own tests (see ``fake.py``)."""

from tests.fakes.http import Fault, Stall
from tests.fakes.jira.fake import ADMIN, BOT, DEVELOPERS, OUTSIDER, TEAMMATE, FakeJira
from tests.fakes.jira.records import RecordedRequest

__all__ = [
    "ADMIN",
    "BOT",
    "DEVELOPERS",
    "OUTSIDER",
    "TEAMMATE",
    "FakeJira",
    "Fault",
    "RecordedRequest",
    "Stall",
]
