"""The domain's errors say what failed in one line and carry what a caller decides on; the
policies allow or reject commands by type."""

from __future__ import annotations

import pytest

from domain.commands import MergeRevision, TransitionStatus
from domain.errors import (
    AgentFailure,
    ConfigError,
    ConflictError,
    InvalidAgentOutputError,
    MergeWaitError,
    NotFoundError,
    ProviderError,
    UnknownEntityError,
)
from domain.policy import ALLOWED, DEFAULT_POLICY, AllOf, AllowAll, DenyCommands, Rejected
from tests.domain.builders import state


def test_a_config_error_names_the_key_and_what_was_expected() -> None:
    error = ConfigError("not a number", key_path="runtime.max_turns", expected="an integer")
    assert str(error) == "runtime.max_turns: not a number; expected an integer"
    assert (error.key_path, error.expected) == ("runtime.max_turns", "an integer")
    assert str(ConfigError("no file")) == "no file"
    assert (ConfigError("x").key_path, ConfigError("x").expected) == (None, None)


def test_entity_and_agent_output_errors_name_what_and_which() -> None:
    unknown = UnknownEntityError("work item", "7")
    assert (str(unknown), unknown.kind, unknown.entity_id) == (
        "unknown work item '7'",
        "work item",
        "7",
    )
    bad = InvalidAgentOutputError("planner", "create is missing")
    assert (str(bad), bad.role, bad.detail) == (
        "invalid planner output: create is missing",
        "planner",
        "create is missing",
    )


@pytest.mark.parametrize(
    ("status", "transient"),
    [(None, False), (400, False), (401, False), (403, True), (404, False), (408, True),
     (409, False), (422, False), (429, True), (499, False), (500, True), (502, True)],
)  # fmt: skip
def test_a_provider_error_is_transient_for_5xx_and_the_limits(
    status: int | None, transient: bool
) -> None:
    assert ProviderError("x", status=status).transient is transient


def test_a_provider_error_says_the_method_and_status_and_keeps_its_fields() -> None:
    error = ProviderError("refused", status=422, retry_after=3.5, method="create issue")
    assert str(error) == "create issue: refused (status 422)"
    assert (error.status, error.retry_after, error.method) == (422, 3.5, "create issue")
    assert str(ProviderError("down")) == "down"
    assert ProviderError("x", status=500, transient=False).transient is False
    assert ProviderError("x", status=400, transient=True).transient is True
    assert (ProviderError("x").status, ProviderError("x").retry_after) == (None, None)


def test_the_provider_errors_kinds_carry_their_status_and_are_never_transient() -> None:
    missing = NotFoundError("no issue #9", method="get issue")
    assert (str(missing), missing.status, missing.transient) == (
        "get issue: no issue #9 (status 404)",
        404,
        False,
    )
    conflict = ConflictError("stale head")
    assert (str(conflict), conflict.status, conflict.transient) == (
        "stale head (status 409)",
        409,
        False,
    )
    assert ConflictError("x", status=422, method="merge").status == 422
    assert str(ConflictError("x", status=422, method="merge")) == "merge: x (status 422)"
    wait = MergeWaitError("not yet", reason="checks pending")
    assert (wait.reason, wait.status, wait.transient) == ("checks pending", 405, False)
    assert str(wait) == "not yet (status 405)"


def test_an_agent_failure_says_its_kind_and_reason_and_whether_it_is_infrastructure() -> None:
    failure = AgentFailure("timed-out", "30 s")
    assert (str(failure), failure.kind, failure.reason) == (
        "agent timed-out: 30 s",
        "timed-out",
        "30 s",
    )
    assert failure.infrastructure is False
    assert AgentFailure("failed", "401", infrastructure=True).infrastructure is True


MERGE = MergeRevision(work_item_id="1", revision_id="r1")
MOVE = TransitionStatus(work_item_id="1", to="done")


def test_the_default_policy_allows_everything() -> None:
    assert isinstance(DEFAULT_POLICY, AllowAll)
    assert DEFAULT_POLICY.check(MERGE, state()) == ALLOWED
    assert ALLOWED.verdict == "allowed"


def test_deny_commands_rejects_the_listed_types_with_its_reason() -> None:
    policy = DenyCommands(["MergeRevision"], reason="a person merges")
    assert policy.check(MERGE, state()) == Rejected(reason="MergeRevision: a person merges")
    assert policy.check(MOVE, state()) == ALLOWED
    assert DenyCommands(["MergeRevision"]).check(MERGE, state()) == Rejected(
        reason="MergeRevision: denied by policy"
    )
    assert Rejected(reason="r").verdict == "rejected"


def test_all_of_allows_only_what_every_policy_allows_and_the_first_rejection_wins() -> None:
    first = DenyCommands(["MergeRevision"], reason="first")
    second = DenyCommands(["MergeRevision", "TransitionStatus"], reason="second")
    both = AllOf(AllowAll(), first, second)
    assert both.check(MERGE, state()) == Rejected(reason="MergeRevision: first")
    assert both.check(MOVE, state()) == Rejected(reason="TransitionStatus: second")
    assert AllOf(AllowAll()).check(MOVE, state()) == ALLOWED
    assert AllOf().check(MOVE, state()) == ALLOWED
