"""The whole loop with the work items in Linear and the revisions on GitHub: a real ``cpe run``
with ``[provider.work_items] kind = "linear"`` on the fake Linear and ``[provider.revisions]
kind = "github"`` on the fake GitHub (``tests/e2e/test_mixed_pairs.py``'s harness: the demo's
sample as the repository's content, the scripted model playing the demo's book, a fake CI on
every pull request's head).

The team ``ENG`` has Linear's default workflow plus the states cpe's statuses need that it
lacks (``Needs Refinement``, ``Approved``, ``Blocked``), as a team would add them. A guest's
issue sits in the team, not admitted: cpe must leave it alone. The planner's two items are
issues cpe makes in the team (``ENG-2``, ``ENG-3``), the second blocked by the first through a
``blocks`` relation; the implementors' revisions are pull requests on GitHub that name their
item; both are merged and both issues end in the team's ``Done`` state."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from adapters.demo.book import ITEM_ONE_TITLE, ITEM_TWO_TITLE
from domain.models import WorkItem, WorkItemId
from tests.e2e.test_mixed_pairs import TrackerAndGitHubLoop
from tests.fakes.github import FakeGitHub
from tests.fakes.linear.fake import BOT, GUEST, FakeLinear

LINEAR_TOKEN_ENV = "CPE_E2E_LINEAR_TOKEN"
LINEAR_TOKEN = "lin_api_e2e_token"
# The states cpe's statuses need beyond Linear's default workflow: (name, type).
CPE_STATES = (("Needs Refinement", "unstarted"), ("Approved", "started"), ("Blocked", "unstarted"))
BYSTANDER = "A guest's idea"  # filed by a guest, never admitted: cpe leaves it alone
# Error answers a loop may meet: a lookup of what is not there (or not yet), and Linear's limit.
ANSWERS = frozenset({"INPUT_ERROR", "RATELIMITED"})
# Linear's writes paced a hundred times the provider's defaults: a loop's writes are not spread
# over token-bucket waits.
FAST_PACING = "writes_per_minute = 3000\nwrites_per_hour = 60000\nwrite_burst = 100\n"
REAL_PACING = ""  # the provider's defaults


def prepare_linear(linear: FakeLinear) -> None:
    """The team as a person would set it up for cpe: the states it needs, the token, and a
    guest's issue that no one admitted."""
    for name, kind in CPE_STATES:
        linear.add_state(name, kind)
    linear.add_token(LINEAR_TOKEN, BOT)
    linear.open_issue(BYSTANDER, "Could we have a dark mode?", as_user=GUEST)


class LinearAndGitHubLoop(TrackerAndGitHubLoop):
    """The work items as issues of the fake Linear (read from its records: an item is done
    when its issue is in a ``completed`` state)."""

    tracker = "linear"

    def __init__(
        self, base: Path, github: FakeGitHub, linear: FakeLinear, *, extra: str = FAST_PACING
    ) -> None:
        self.linear = linear
        self.tracker_section = (
            "[provider.linear]\n"
            f'team = "{linear.team_key}"\n'
            f'api_url = "{linear.url}"\n'
            f'token_env = "{LINEAR_TOKEN_ENV}"\n'
            "request_timeout = 30\n"
            "backoff_initial = 0.2\n"
            "max_retry_wait = 5\n"
            f"{extra}"
        )
        env: Mapping[str, str] = {LINEAR_TOKEN_ENV: LINEAR_TOKEN}
        super().__init__(base, github, env)

    def items(self) -> list[WorkItem]:
        """cpe's issues (made by the bot) as work items, oldest first."""
        linear = self.linear
        found = []
        for key in linear.identifiers():
            issue = linear.issue(key)
            if issue["creator"] != BOT:
                continue
            found.append(
                WorkItem(
                    id=WorkItemId(key),
                    title=issue["title"],
                    status="done" if issue["state_type"] == "completed" else "pending",
                    blocked_by=tuple(WorkItemId(b) for b in issue["blocked_by"]),
                )
            )
        return found

    def check_invariants(self) -> None:
        """``TrackerAndGitHubLoop``'s, and on Linear: the two issues made once each by cpe, in
        ``Done``, the second blocked by the first (one ``blocks`` relation), never archived;
        cpe's comments on them each said once (the revision opened, then merged); the guest's
        issue untouched."""
        super().check_invariants()
        linear = self.linear
        items = {i.title: i for i in self.items()}
        first, second = items[ITEM_ONE_TITLE], items[ITEM_TWO_TITLE]
        assert (first.id, second.id) == ("ENG-2", "ENG-3"), self.state()
        for item in (first, second):
            issue = linear.issue(item.id)
            assert (issue["state"], issue["archived"]) == ("Done", False), issue
            comments = linear.comments(item.id)
            said = Counter(body for _, body in comments)
            assert all(n == 1 for n in said.values()), f"said twice on {item.id}: {said}"
            assert {who for who, _ in comments} == {BOT}, comments
            # What cpe says on an item: the revision opened, then merged, once each.
            for what in ("opened revision", "merged revision"):
                assert sum(what in body for body in said) == 1, (what, comments)
        assert linear.issue(first.id)["blocks"] == [second.id]
        relations = list(linear.workspace.relations.values())
        assert [r.type for r in relations] == ["blocks"], relations
        bystander = linear.issue("ENG-1")
        assert bystander["title"] == BYSTANDER
        assert (bystander["state"], bystander["labels"]) == ("Backlog", [])
        assert bystander["updated_at"] == bystander["created_at"]
        assert linear.comments("ENG-1") == []
        assert all(r.auth == "api_key" for r in linear.requests), "a request without the key"
        # Every document cpe sent was valid against Linear's schema, within its limits, and
        # asked nothing the fake does not model (a lookup's "not found" and RATELIMITED may be).
        wrong = [(r.operation_name, r.codes) for r in linear.requests if set(r.codes) - ANSWERS]
        assert wrong == [], wrong
