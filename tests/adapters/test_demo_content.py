"""The content of ``cpe demo``: the sample repository, the scenario book, and the loop they play.

The loop tests drive the whole demo without the engine: the real local provider (tracker,
revisions from patches, the unittest pipeline in its own thread, reviews, merges), prompts
from ``assemble_prompt``, the book's own ``select``. ``Session`` plays a scenario's tool calls
with the claude CLI's file rules (Write of an existing file and Edit need a Read or Write first
in the session, Edit's ``old_string`` must occur exactly once); the last test plays the same
loop through the real ``claude`` CLI and the Claude SDK adapter against the scripted model.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.bash_guard import BashGuardConfig, check_bash
from adapters.cli.settings import load_config, parse_config
from adapters.demo import (
    DEFAULT_BRANCH,
    ITEM_ONE_TITLE,
    ITEM_TWO_TITLE,
    PIPELINE_COMMAND,
    SPEC_PATH,
    SUPERVISOR_TOML,
    create_sample_repo,
    demo_book,
)
from adapters.demo.book import BOOK_RULES
from adapters.demo.sample import SampleRepoError, agent_definitions_dir
from adapters.providers.local.pipeline import LocalPipeline
from adapters.providers.local.provider import LocalProvider
from adapters.providers.specs.globs import PathMatcher
from adapters.runtime.claude.sdk import ClaudeAdapterConfig, create_claude_adapter
from adapters.runtime.prompt.context import assemble_prompt
from adapters.runtime.workspace.patches import extract_patch
from adapters.runtime.workspace.worktrees import WorktreeManager
from adapters.scripted_model import (
    Conversation,
    Scenario,
    ScriptedModelServer,
    ToolBlock,
)
from adapters.scripted_model.scenario import next_turn, select
from domain.models import (
    AgentStartParams,
    EngineState,
    ImplementorStartParams,
    Pipeline,
    PlannerStartParams,
    ReviewerStartParams,
    Revision,
    RevisionId,
    SessionId,
    WorkItemId,
)
from domain.ports import RuntimeAdapterDeps, SessionLogging
from domain.results import (
    AgentOutput,
    ImplementorOutput,
    ImplementorResult,
    PlannerResult,
    ReviewerResult,
    validate_output,
)
from tests.support.git import git, isolate_git

ROOT = Path(__file__).resolve().parents[2]
TEST_COMMAND = shlex.join(PIPELINE_COMMAND)
PLAYED_IN_ORDER = [
    "plan",
    "plan_nothing_new",
    "implement_greet",
    "review_greet_changes",
    "implement_greet_fix",
    "review_greet_approve",
    "implement_greet_all",
    "review_greet_all_approve",
]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_git(monkeypatch)
    # Pipeline worktrees, patch indexes and the CLI's throwaway homes go under tmp_path.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return create_sample_repo(tmp_path / "sample")


def run_suite(cwd: Path, *, bytecode: bool = True) -> subprocess.CompletedProcess[str]:
    """The sample's test command, as argv (no shell), in ``cwd``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        list(PIPELINE_COMMAND),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def rendered_turns(
    scenario: Scenario, cwd: str, variables: dict[str, str] | None = None
) -> list[tuple[Any, ...]]:
    """Every turn of ``scenario`` as the server renders it for a conversation in ``cwd``."""
    turns = []
    for index in range(len(scenario.turns)):
        conversation = Conversation(
            system="", prompt="", role=scenario.match.role, cwd=cwd, assistant_turns=index
        )
        turns.append(next_turn(scenario, conversation, variables or {}))
    return turns


def tool_blocks(scenario: Scenario, cwd: str = "/work/tree") -> list[ToolBlock]:
    return [
        block
        for turn in rendered_turns(scenario, cwd)
        for block in turn
        if isinstance(block, ToolBlock)
    ]


# ---------------------------------------------------------------------------- the sample repository


def test_the_sample_is_one_commit_on_main_with_its_own_identity_and_a_clean_tree(
    sample: Path,
) -> None:
    assert git(sample, "symbolic-ref", "--short", "HEAD") == DEFAULT_BRANCH
    assert git(sample, "rev-list", "--count", "HEAD") == "1"
    assert git(sample, "config", "--local", "user.name")
    assert git(sample, "config", "--local", "user.email")
    assert git(sample, "status", "--porcelain", "--untracked-files=all") == ""
    tracked = set(git(sample, "ls-files").splitlines())
    assert {
        ".gitignore",
        "README.md",
        "supervisor.toml",
        SPEC_PATH,
        "greetings/__init__.py",
        "tests/__init__.py",
        "tests/test_package.py",
        ".claude/CLAUDE.md",
    } <= tracked
    # the engine's state, worktrees and Python's caches never show up in a patch
    for ignored in (".cpe/journal.sqlite3", ".worktrees/cpe/1-x/a.py", "tests/__pycache__/t.pyc"):
        assert git(sample, "check-ignore", ignored) == ignored


def test_the_agent_definitions_are_this_project_s_own(sample: Path) -> None:
    source = ROOT / ".claude"
    assert agent_definitions_dir().resolve() == source  # the shipped copy is this one
    agents = sorted(p.name for p in (source / "agents").glob("*.md"))
    assert agents == ["implementor.md", "planner.md", "reviewer.md"]
    for relative in ["CLAUDE.md", *(f"agents/{name}" for name in agents)]:
        assert (sample / ".claude" / relative).read_bytes() == (source / relative).read_bytes()


def test_the_sample_suite_passes_on_main_as_created(sample: Path) -> None:
    done = run_suite(sample, bytecode=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ran 1 test" in done.stderr


def test_a_directory_that_holds_anything_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine\n")
    with pytest.raises(SampleRepoError, match="not an empty directory"):
        create_sample_repo(target)
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert create_sample_repo(empty) == empty.resolve()


def test_the_demo_supervisor_toml_validates_and_says_what_the_demo_needs(sample: Path) -> None:
    config = load_config(sample / "supervisor.toml")
    assert config == parse_config(tomllib.loads(SUPERVISOR_TOML))
    assert config.provider.work_items_kind == config.provider.revisions_kind == "local"
    assert tuple(config.provider.local.pipeline_command) == PIPELINE_COMMAND
    assert config.workflow.auto_merge is True
    assert config.repository.default_branch == DEFAULT_BRANCH
    assert config.runtime.max_agent_duration == 120
    pollers = config.pollers
    intervals = (pollers.work_items_interval, pollers.revisions_interval, pollers.specs_interval)
    assert all(0 < interval <= 1 for interval in intervals)
    assert set(config.runtime.roles.model_dump().values()) == {"claude-sdk"}
    assert PathMatcher(config.specs.globs)(SPEC_PATH)
    assert all((sample / path).is_file() for path in config.runtime.context_paths)
    assert config.workflow.branch_prefix == "cpe/"


# ---------------------------------------------------------------------------- the book


def test_the_book_uses_every_scenario_file_once_with_a_role_each() -> None:
    folder = resources.files("adapters.demo").joinpath("scenarios")
    files = sorted(
        p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json")
    )
    book = demo_book()
    assert sorted(s.name for s in book) == files
    assert [s.name for s in book] == [name for name, _ in BOOK_RULES]
    assert all(s.match.role in ("planner", "implementor", "reviewer") for s in book)
    # the rules live in book.py only: a file's own "match" would be silently replaced
    for name in files:
        data = json.loads(folder.joinpath(f"{name}.json").read_text(encoding="utf-8"))
        assert "match" not in data, name


@pytest.mark.parametrize("scenario", demo_book(), ids=lambda s: s.name)
def test_each_scenario_ends_with_one_valid_structured_output(scenario: Scenario) -> None:
    blocks = tool_blocks(scenario)
    outputs = [b for b in blocks if b.tool == "StructuredOutput"]
    assert len(outputs) == 1
    assert blocks[-1] is outputs[0]
    assert scenario.match.role is not None
    validate_output(scenario.match.role, outputs[0].input)  # type: ignore[arg-type]


@pytest.mark.parametrize("scenario", demo_book(), ids=lambda s: s.name)
def test_each_scenario_touches_files_under_its_cwd_and_runs_only_the_suite(
    scenario: Scenario, tmp_path: Path
) -> None:
    allowed = {
        "planner": {"Read", "StructuredOutput"},
        "reviewer": {"Read", "StructuredOutput"},
        "implementor": {"Read", "Write", "Edit", "Bash", "StructuredOutput"},
    }[scenario.match.role or ""]
    for tool in ("Read", "Write", "Edit"):
        for tool_input in scenario.tool_inputs(tool):
            assert tool_input["file_path"].startswith("{cwd}/")
    for block in tool_blocks(scenario, str(tmp_path)):
        assert block.tool in allowed
        if block.tool == "Bash":
            assert block.input["command"] == TEST_COMMAND
            verdict = check_bash(TEST_COMMAND, worktree=tmp_path, config=BashGuardConfig())
            assert verdict.allowed, verdict.reason


def test_the_plan_makes_the_two_items_the_book_matches_the_second_blocked_by_the_first() -> None:
    plan = _output(_scenario("plan"))
    assert isinstance(plan, PlannerResult)
    first, second = plan.create
    assert (first.title, second.title) == (ITEM_ONE_TITLE, ITEM_TWO_TITLE)
    assert first.blocked_by == ()
    assert second.blocked_by == (first.temp_id,)
    for item in plan.create:
        assert "Acceptance criteria" in item.body
        assert "### " not in item.body  # no heading a rule could mistake for a prompt section
    assert _output(_scenario("plan_nothing_new")) == PlannerResult()


def test_the_first_review_comments_on_the_line_the_first_round_wrote() -> None:
    review = _output(_scenario("review_greet_changes"))
    assert isinstance(review, ReviewerResult)
    assert review.review.verdict == "needs-changes"
    written = {
        b.input["file_path"].removeprefix("/work/tree/"): b.input["content"]
        for b in tool_blocks(_scenario("implement_greet"))
        if b.tool == "Write"
    }
    for comment in review.review.comments:
        assert comment.path in written
        if comment.line is not None:
            assert written[comment.path].splitlines()[comment.line - 1].strip().startswith("return")
    verdicts = [
        _output(_scenario(name)) for name in ("review_greet_approve", "review_greet_all_approve")
    ]
    assert all(isinstance(v, ReviewerResult) and v.review.verdict == "approve" for v in verdicts)


# ---------------------------------------------------------------------------- the loop, simulated


class Session:
    """Plays a scenario's tool calls in ``cwd`` by the claude CLI's rules for its file tools."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd.resolve()
        self.known: set[Path] = set()  # read or written in this session
        self.output: dict[str, Any] | None = None
        self.suite_runs: list[str] = []

    def run(self, block: ToolBlock) -> None:
        args = block.input
        if block.tool == "StructuredOutput":
            assert self.output is None, "StructuredOutput twice"
            self.output = args
            return
        if block.tool == "Bash":
            assert args["command"] == TEST_COMMAND
            done = run_suite(self.cwd)
            assert done.returncode == 0, f"the suite fails in {self.cwd}:\n{done.stderr}"
            self.suite_runs.append(done.stderr)
            return
        path = Path(args["file_path"])
        assert path.is_absolute()
        assert path.resolve().is_relative_to(self.cwd), f"{path} is outside {self.cwd}"
        if block.tool == "Read":
            assert path.is_file(), f"Read of a missing file {path}"
        elif block.tool == "Write":
            assert not path.exists() or path in self.known, f"Write of {path} before a Read"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(args["content"], encoding="utf-8")
        elif block.tool == "Edit":
            assert path in self.known, f"Edit of {path} before a Read or Write"
            text = path.read_text(encoding="utf-8")
            old, new = args["old_string"], args["new_string"]
            assert text.count(old) == 1, f"Edit's old_string occurs {text.count(old)}x in {path}"
            path.write_text(text.replace(old, new), encoding="utf-8")
        else:
            pytest.fail(f"unexpected tool {block.tool}")
        self.known.add(path)


class Loop:
    """The demo's loop on the real local provider; ``drive`` runs one agent and returns what it
    played and its result (an ``ImplementorResult`` carries the patch)."""

    def __init__(self, repo: Path, state_dir: Path) -> None:
        self.repo = repo
        pipeline = LocalPipeline(list(PIPELINE_COMMAND), timeout=120)
        self.provider = LocalProvider(repo, state_dir, DEFAULT_BRANCH, pipeline)
        self.book = demo_book()
        self.played: list[str] = []
        self.override: EngineState | None = None

    def state(self) -> EngineState:
        if self.override is not None:
            return self.override
        return EngineState(
            work_items={w.id: w for w in self.provider.work_item_reader.list_work_items()},
            revisions={r.id: r for r in self.provider.revision_reader.list_revisions()},
        )

    def deps(self) -> RuntimeAdapterDeps:
        reader = self.provider.revision_reader
        return RuntimeAdapterDeps(
            work_item_reader=self.provider.work_item_reader,
            revision_reader=reader,
            get_state=self.state,
            get_review_history=reader.get_review_history,
        )

    def prompt(self, params: AgentStartParams) -> str:
        return assemble_prompt(
            params,
            self.deps(),
            repo_root=self.repo,
            read_blob=lambda sha: git(self.repo, "cat-file", "blob", sha),
        )

    def pick(self, params: AgentStartParams) -> tuple[Scenario, dict[str, str]]:
        conversation = Conversation(
            system="", prompt=self.prompt(params), role=params.role, cwd=None, assistant_turns=0
        )
        return select(self.book, conversation)

    def revision(self, revision_id: RevisionId) -> Revision:
        return next(
            r for r in self.provider.revision_reader.list_revisions() if r.id == revision_id
        )

    def green(self, revision_id: RevisionId) -> Revision:
        assert self.provider.wait_for_pipelines(120)
        revision = self.revision(revision_id)
        assert revision.pipeline.status == "success", revision.pipeline
        return revision


Driver = Callable[[Loop, AgentStartParams], tuple[str, Any]]


def simulated(loop: Loop, params: AgentStartParams) -> tuple[str, Any]:
    """Play the book's pick as the CLI would: the implementor in a fresh worktree from main."""
    scenario, variables = loop.pick(params)
    worktrees = WorktreeManager(loop.repo, DEFAULT_BRANCH)
    tree = (
        worktrees.create(params.branch_name) if isinstance(params, ImplementorStartParams) else None
    )
    try:
        session = Session(tree.path if tree is not None else loop.repo)
        for turn in rendered_turns(scenario, str(session.cwd), variables):
            for block in turn:
                if isinstance(block, ToolBlock):
                    session.run(block)
        assert params.role == scenario.match.role
        output = validate_output(params.role, session.output)
        if isinstance(output, ImplementorOutput):
            assert output.outcome == "completed"
            assert session.suite_runs, "completed without running the tests"
            assert tree is not None
            output = ImplementorResult(
                outcome=output.outcome,
                summary=output.summary,
                patch=extract_patch(tree.path, DEFAULT_BRANCH),
            )
    finally:
        if tree is not None:
            worktrees.remove(tree)
    return scenario.name, output


def play_the_loop(loop: Loop, drive: Driver) -> None:
    """plan → #1 → changes → #1 again → approve, merge → #2 (blocked by #1) → approve, merge."""
    provider = loop.provider

    def run(params: AgentStartParams, expected: str) -> Any:
        name, result = drive(loop, params)
        loop.played.append(name)
        assert name == expected
        return result

    plan = run(
        PlannerStartParams(session_id=SessionId("planner-1"), spec_paths=(SPEC_PATH,)), "plan"
    )
    assert isinstance(plan, PlannerResult)
    ids: dict[str, WorkItemId] = {}
    for item in plan.create:
        ids[item.temp_id] = provider.work_item_writer.create_work_item(
            item.title, item.body, item.labels, [ids[b] for b in item.blocked_by]
        )
    one, two = ids.values()
    assert loop.state().work_items[two].blocked_by == (one,)
    again = run(
        PlannerStartParams(session_id=SessionId("planner-2"), spec_paths=(SPEC_PATH,)),
        "plan_nothing_new",
    )
    assert again == PlannerResult()

    def implement(wid: WorkItemId, session: SessionId, expected: str) -> ImplementorResult:
        params = ImplementorStartParams(
            session_id=session, work_item_id=wid, branch_name=f"cpe/{wid}-demo"
        )
        result = run(params, expected)
        assert isinstance(result, ImplementorResult)
        assert result.outcome == "completed"
        assert result.patch
        assert "__pycache__" not in result.patch
        return result

    def review(wid: WorkItemId, rid: RevisionId, session: SessionId, expected: str) -> str:
        params = ReviewerStartParams(session_id=session, work_item_id=wid, revision_id=rid)
        result = run(params, expected)
        assert isinstance(result, ReviewerResult)
        provider.revision_writer.post_review(rid, loop.revision(rid).head_sha, result.review)
        return result.review.verdict

    writer = provider.revision_writer
    # item one, first round: a green revision the reviewer sends back
    first = implement(one, SessionId("implementor-1"), "implement_greet")
    assert first.patch is not None
    rev = writer.create_from_patch(
        one, f"cpe/{one}-demo", ITEM_ONE_TITLE, first.summary, first.patch
    ).id
    loop.green(rev)
    assert review(one, rev, SessionId("reviewer-1"), "review_greet_changes") == "needs-changes"
    # item one, second round: the prompt carries the review; the worktree starts from main
    second = implement(one, SessionId("implementor-2"), "implement_greet_fix")
    assert second.patch is not None
    assert writer.update_from_patch(rev, second.patch).id == rev
    loop.green(rev)
    assert review(one, rev, SessionId("reviewer-2"), "review_greet_approve") == "approve"
    writer.merge(rev)
    provider.work_item_writer.transition_status(one, "done")
    # item two, on top of the merged item one
    third = implement(two, SessionId("implementor-3"), "implement_greet_all")
    assert third.patch is not None
    rev2 = writer.create_from_patch(
        two, f"cpe/{two}-demo", ITEM_TWO_TITLE, third.summary, third.patch
    ).id
    loop.green(rev2)
    assert review(two, rev2, SessionId("reviewer-3"), "review_greet_all_approve") == "approve"
    writer.merge(rev2)
    provider.work_item_writer.transition_status(two, "done")
    assert loop.played == PLAYED_IN_ORDER


def assert_main_holds_both_features(repo: Path) -> None:
    assert git(repo, "status", "--porcelain") == ""
    module = git(repo, "show", f"{DEFAULT_BRANCH}:greetings/greet.py")
    assert "def greet(" in module
    assert "def greet_all(" in module
    assert "raise ValueError" in module
    done = run_suite(repo, bytecode=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ran 7 tests" in done.stderr


def test_the_book_plays_the_whole_loop_and_main_ends_green(sample: Path, tmp_path: Path) -> None:
    loop = Loop(sample, tmp_path / "state")
    try:
        play_the_loop(loop, simulated)
    finally:
        loop.provider.close()
    assert_main_holds_both_features(sample)


def test_a_rerun_after_a_failed_pipeline_plays_the_first_round_again(
    sample: Path, tmp_path: Path
) -> None:
    loop = Loop(sample, tmp_path / "state")
    try:
        one = loop.provider.work_item_writer.create_work_item(ITEM_ONE_TITLE, "Add greet.")
        _, first = simulated(loop, ImplementorStartParams(work_item_id=one, branch_name="cpe/a"))
        assert isinstance(first, ImplementorResult)
        assert first.patch is not None
        rev = loop.provider.revision_writer.create_from_patch(
            one, "cpe/a", ITEM_ONE_TITLE, first.summary, first.patch
        )
        loop.green(rev.id)
        state = loop.state()
        failed = rev.model_copy(update={"pipeline": Pipeline(status="failure", reason="boom")})
        loop.override = state.model_copy(update={"revisions": {rev.id: failed}})
        params = ImplementorStartParams(work_item_id=one, branch_name="cpe/a")
        prompt = loop.prompt(params)
        assert "### CI Status: FAILURE" in prompt
        assert "### Prior Reviews" not in prompt
        assert loop.pick(params)[0].name == "implement_greet"
        reviewer = ReviewerStartParams(work_item_id=one, revision_id=rev.id)
        assert loop.pick(reviewer)[0].name == "review_greet_changes"
    finally:
        loop.provider.close()


# ---------------------------------------------------------------------------- the loop, real CLI


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(demo_book()) as server:
        yield server


@pytest.mark.timeout(300)
def test_the_real_cli_plays_the_whole_loop_against_the_book(
    sample: Path, tmp_path: Path, scripted_model: ScriptedModelServer
) -> None:
    loop = Loop(sample, tmp_path / "state")
    config = ClaudeAdapterConfig(
        repo_root=str(sample),
        default_branch=DEFAULT_BRANCH,
        max_agent_duration=120,
        logging=SessionLogging(logs_dir=str(tmp_path / "runs")),
        agent_env=scripted_model.client_env(),
        isolated_home=True,
        kill_grace=2,
    )
    adapter = create_claude_adapter(config, loop.deps())

    def through_the_cli(loop: Loop, params: AgentStartParams) -> tuple[str, Any]:
        seen = len(scripted_model.requests)

        async def main() -> Any:
            handle = await adapter.start_agent(params)
            async for _ in handle.output:
                pass
            return await handle.result

        result = anyio.run(main)
        turns = [r for r in scripted_model.requests[seen:] if r.kind == "turn"]
        assert [r.error for r in turns if r.error] == []
        failed = [t.content for r in turns for t in r.tool_results if t.is_error]
        assert failed == [], f"a tool call failed in {params.session_id}: {failed}"
        names = {r.scenario for r in turns}
        assert len(names) == 1, names
        return str(names.pop()), result

    try:
        play_the_loop(loop, through_the_cli)
    finally:
        loop.provider.close()
    assert_main_holds_both_features(sample)
    bash_results = [
        t.content
        for r in scripted_model.requests
        if r.conversation is not None and r.conversation.role == "implementor"
        for t in r.tool_results
        if "Ran " in t.content
    ]
    assert len(bash_results) == 3
    assert all("OK" in text for text in bash_results)


# ---------------------------------------------------------------------------- helpers


def _scenario(name: str) -> Scenario:
    return next(s for s in demo_book() if s.name == name)


def _output(scenario: Scenario) -> AgentOutput:
    (block,) = [b for b in tool_blocks(scenario) if b.tool == "StructuredOutput"]
    assert scenario.match.role is not None
    return validate_output(scenario.match.role, block.input)  # type: ignore[arg-type]


@pytest.mark.parametrize("item_id", ["1", "ENG-1", "PROJ-12"])
def test_the_books_item_rules_match_an_item_named_by_number_or_by_key(item_id: str) -> None:
    """Linear's and Jira's items are keys: the prompt's heading names them as it names numbers
    (``## Work Item #<id> — <title>``, docs/scripted-model.md), and the book's rules must still
    find their item."""
    heading = f"## Work Item #{item_id} — {ITEM_ONE_TITLE}"
    rules = dict(BOOK_RULES)
    assert re.search(str(rules["implement_greet"].prompt), f"{heading}\n\nbody")
    reviewed = f"{heading}\n\nbody\n### Prior Reviews\n- changes requested"
    assert re.search(str(rules["implement_greet_fix"].prompt), reviewed)
    other = f"## Work Item #{item_id} — {ITEM_TWO_TITLE}"
    assert not re.search(str(rules["implement_greet"].prompt), other)
