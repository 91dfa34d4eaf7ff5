"""A stateful fake Linear (GraphQL) for the Linear provider's tests, the end-to-end loop and its
own tests (see ``fake.py``); it serves ``schema.graphql``, a subset of Linear's public SDL."""

from tests.fakes.http import Fault, Stall
from tests.fakes.linear.fake import (
    API_KEY,
    BOT,
    GUEST,
    OAUTH_TOKEN,
    OUTSIDER,
    TEAM_KEY,
    TEAMMATE,
    FakeLinear,
)
from tests.fakes.linear.wire import LinearFault, LinearRequest

__all__ = [
    "API_KEY",
    "BOT",
    "GUEST",
    "OAUTH_TOKEN",
    "OUTSIDER",
    "TEAMMATE",
    "TEAM_KEY",
    "Fault",
    "FakeLinear",
    "LinearFault",
    "LinearRequest",
    "Stall",
]
