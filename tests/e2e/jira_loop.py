"""The whole loop with the work items on Jira and the revisions local: the fake Jira
(``tests/fakes/jira``) keeping the project's issues, the demo's sample repository configured with
``[provider.work_items] kind = "jira"`` and ``[provider.revisions] kind = "local"`` (the local
forge serving another system's tracker: its pipeline is the sample's tests), the scripted model
playing the demo's book, and ``cpe run`` on it (killed at a crashpoint and restarted, as the
crash suite does it, when a test asks).

The planner's items are made as Jira issues (the second blocked by the first through a
"Blocks" link), the implementors' revisions are local revisions named by the issues' keys
(``cpe/PROJ-1-...``), reviewed, merged, and the issues moved through the workflow to Done. Around
them: an issue someone outside the trusted group filed is none of cpe's work (left as it is),
and every request cpe sent fits Atlassian's description of the API (the fake's OpenAPI subset).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.journal import Journal
from adapters.cli.demo import FEATURES
from adapters.demo.book import ITEM_ONE_TITLE, ITEM_TWO_TITLE
from adapters.demo.sample import create_sample_repo
from adapters.providers import ProviderRoles
from adapters.providers.local.provider import LocalProvider
from domain.events import StatusTransitioned
from domain.models import Revision
from tests.e2e.crash import Loop
from tests.fakes.jira import BOT, DEVELOPERS, OUTSIDER, FakeJira
from tests.support.git import git_raw
from tests.support.jira import check_against_openapi
from tests.support.jira_provider import full_workflow

TOKEN_ENV = "CPE_E2E_JIRA_TOKEN"
TOKEN = "e2e-jira-token"
FORGE = ProviderRoles(work_items=False, revisions=True)
ONE_SYSTEM = '[provider]\nkind = "local"\n'
APART = '[provider.work_items]\nkind = "jira"\n[provider.revisions]\nkind = "local"\n'
# Someone's issue in the project, filed by a user outside the trusted group: not cpe's work.
BYSTANDER = "A question about the README"

JIRA_SECTION = """
[provider.jira]
base_url = "{base_url}"
deployment = "{deployment}"
project = "{project}"
{email}token_env = "{token_env}"
request_timeout = 30
trusted_groups = ["{group}"]
writes_per_minute = 6000
writes_per_hour = 60000
write_burst = 100
"""


def jira_for_the_loop(**options: Any) -> FakeJira:
    """A fake Jira as the loop wants it: a workflow with a status for each of cpe's, the token
    ``TOKEN`` is cpe's (``cpe-bot``), editing issues is the ``developers`` group's only (cpe's
    account among them), and ``bob`` (outside it) has filed the bystander issue."""
    jira = FakeJira(tokens={TOKEN: BOT}, **options)
    jira.keep_responses = True
    full_workflow(jira)
    jira.add_to_group(BOT, DEVELOPERS)
    jira.revoke("EDIT_ISSUES", "jira-software-users")
    jira.grant("EDIT_ISSUES", DEVELOPERS)
    jira.open_issue(BYSTANDER, "Where is the README's second half?", by=OUTSIDER)
    return jira


def jira_repo(base: Path, jira: FakeJira) -> Path:
    """The demo's sample with its work items on ``jira`` and its revisions local."""
    repo = create_sample_repo(base / "sample")
    toml = repo / "supervisor.toml"
    text = toml.read_text()
    assert ONE_SYSTEM in text, "the sample's supervisor.toml names one provider no longer"
    text = text.replace(ONE_SYSTEM, APART).replace('setup_command = ""', 'setup_command = "true"')
    cloud = jira.deployment == "cloud"
    section = JIRA_SECTION.format(
        base_url=jira.base_url,
        deployment=jira.deployment,
        project=jira.project_key,
        email=f'email = "{jira.email(BOT)}"\n' if cloud else "",
        token_env=TOKEN_ENV,
        group=DEVELOPERS,
    )
    toml.write_text(text + section)
    git_raw(repo, "commit", "-qam", "work items on Jira, revisions local")
    return repo


class JiraLoop(Loop):
    """The crash suite's loop with the work items on ``jira``: done when cpe's two issues are
    Done and both local revisions merged."""

    def __init__(self, base: Path, jira: FakeJira) -> None:
        self.jira = jira
        super().__init__(base, jira_repo(base, jira), {TOKEN_ENV: TOKEN})

    def ours(self) -> list[dict[str, Any]]:
        """The issues cpe made (reported by its account), oldest first."""
        found = [self.jira.issue(key) for key in self.jira.issue_keys()]
        return [i for i in found if i["reporter"] == BOT]

    def revisions(self) -> list[Revision]:
        if not (self.repo / ".cpe").exists():
            return []
        with LocalProvider(self.repo, self.repo / ".cpe", "main", roles=FORGE) as forge:
            assert forge.revision_reader is not None
            return list(forge.revision_reader.list_revisions())

    def done(self) -> bool:
        issues = self.ours()
        revisions = self.revisions()
        return (
            len(issues) == 2
            and all(i["status"] == "Done" for i in issues)
            and len(revisions) == 2
            and all(r.state == "merged" for r in revisions)
        )

    def state(self) -> str:
        issues = ", ".join(f"{i['key']} {i['status']} {i['labels']}" for i in self.ours())
        revisions = ", ".join(
            f"{r.id} {r.work_item_id} {r.state} {r.pipeline.status}" for r in self.revisions()
        )
        return f"Jira issues: {issues or 'none'}; revisions: {revisions or 'none'}"

    def check_invariants(self) -> None:
        """What must hold after the loop, however often cpe died on the way: two issues made
        once each (the second blocked by the first), both Done; one revision per issue named by
        its key, merged once; the bystander untouched; every request cpe sent fitting the
        OpenAPI subset; main with both features and its tests passing; nothing left behind."""
        issues = {i["summary"]: i for i in self.ours()}
        assert sorted(issues) == sorted([ITEM_ONE_TITLE, ITEM_TWO_TITLE]), self.state()
        first, second = issues[ITEM_ONE_TITLE], issues[ITEM_TWO_TITLE]
        assert second["blocked_by"] == [first["key"]], second
        assert first["blocked_by"] == []
        assert all(i["status"] == "Done" and i["category"] == "done" for i in issues.values())
        for issue in issues.values():  # what cpe says on an item, once each
            said = [c["text"] for c in issue["comments"] if c["author"] == BOT]
            assert len(said) == len(set(said)), f"{issue['key']}: a comment twice: {said}"
        bystander = self.jira.issue(f"{self.jira.project_key}-1")
        assert bystander["summary"] == BYSTANDER
        assert (bystander["status"], bystander["labels"], bystander["comments"]) == (
            "To Do",
            [],
            [],
        ), bystander
        assert [h["author"] for h in bystander["history"]] == []
        revisions = self.revisions()
        by_item = {r.work_item_id: r for r in revisions}
        assert sorted(by_item) == sorted([first["key"], second["key"]]), self.state()
        assert all(r.state == "merged" for r in revisions), self.state()
        merges = git_raw(self.repo, "log", "--merges", "--format=%s", "main").splitlines()
        for revision in revisions:
            mine = [m for m in merges if m.startswith(f"Merge revision #{revision.id} ")]
            assert len(mine) <= 1, f"revision {revision.id} merged {len(mine)} times: {merges}"
        for path, needles in FEATURES.items():
            text = git_raw(self.repo, "show", f"main:{path}")
            assert all(needle in text for needle in needles), path
        self._check_tests_pass()
        requests = list(self.jira.requests)
        assert {r.user for r in requests if r.status != 401} == {BOT}
        assert {r.api for r in requests} == {self.jira.api}
        check_against_openapi(self.jira)
        journal = Journal(self.repo / ".cpe" / "journal.sqlite3")
        try:
            pending = journal.intents("pending")
            attempts = dict(journal.replay().attempts)
            done = [
                entry.event.work_item_id
                for entry in journal.entries()
                if isinstance(entry.event, StatusTransitioned) and entry.event.to == "done"
            ]
        finally:
            journal.close()
        assert pending == [], f"intents left pending: {[i.key for i in pending]}"
        # The blocked item implemented once: it never ran (and failed) before its blocker was done.
        assert attempts.get(second["key"]) == 1, f"attempts: {attempts}"
        assert sorted(done) == sorted([first["key"], second["key"]]), f"done transitions: {done}"
        listed = git_raw(self.repo, "worktree", "list", "--porcelain").splitlines()
        trees = [line for line in listed if line.startswith("worktree ")]
        assert trees == [f"worktree {self.repo}"], f"worktrees left: {trees}"
        self._check_no_process_left()
