"""Agent definition loading and project context injection (seed 001)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.runtime.prompt.agents import (
    STRUCTURED_OUTPUT_TOOL,
    AgentSpec,
    effective_disallowed_tools,
    effective_tools,
    load_agent_definition,
    load_project_context,
)
from domain.errors import AgentDefinitionError, ContextError
from domain.models import AGENT_ROLES

REPO_ROOT = Path(__file__).resolve().parents[4]

IMPLEMENTOR = (
    "---\n"
    "description: Implements one work item.\n"
    "tools: Read,  Edit ,Bash, , Read\n"
    "disallowedTools: [WebFetch, Bash]\n"
    "maxTurns: 25\n"
    "hooks:\n"
    "  PreToolUse: []\n"
    "permissionMode: default\n"
    "---\n"
    "\n"
    "You implement work items.\n"
    "\n"
    "Run the tests.\n"
)


def write_agent(root: Path, role: str, text: str | bytes) -> Path:
    path = root / ".claude" / "agents" / f"{role}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def agent(root: Path, frontmatter: str, body: str = "Body.") -> AgentSpec:
    write_agent(root, "implementor", f"---\n{frontmatter}---\n{body}\n")
    return load_agent_definition(root, "implementor", [])


# ---------------------------------------------------------------------------- field mapping


def test_agent_file_maps_to_spec(tmp_path: Path) -> None:
    write_agent(tmp_path, "implementor", IMPLEMENTOR)

    spec = load_agent_definition(tmp_path, "implementor", [])

    assert spec == AgentSpec(
        role="implementor",
        description="Implements one work item.",
        prompt="You implement work items.\n\nRun the tests.",
        tools=("Read", "Edit", "Bash"),
        disallowed_tools=("WebFetch", "Bash"),
        model="inherit",
        max_turns=25,
    )


@pytest.mark.spec("S001-34")
@pytest.mark.parametrize(("value", "turns"), [("25", 25), ("'30'", 30), ("' 7 '", 7)])
def test_max_turns_is_parsed_as_integer(tmp_path: Path, value: str, turns: int) -> None:
    assert agent(tmp_path, f"maxTurns: {value}\n").max_turns == turns


@pytest.mark.spec("S001-35")
def test_max_turns_absent_is_none(tmp_path: Path) -> None:
    assert agent(tmp_path, "description: d\n").max_turns is None


@pytest.mark.spec("S001-07")
@pytest.mark.parametrize("value", ["many", "2.5", "true", "0", "-3", "[1]", "'²'"])
def test_max_turns_that_is_not_a_positive_integer_is_malformed(tmp_path: Path, value: str) -> None:
    with pytest.raises(AgentDefinitionError, match="maxTurns must be a positive integer"):
        agent(tmp_path, f"maxTurns: {value}\n")


@pytest.mark.spec("S001-36")
def test_comma_separated_tools_become_a_trimmed_list(tmp_path: Path) -> None:
    spec = agent(tmp_path, "tools: ' Read ,Grep,  Glob  '\n")

    assert spec.tools == ("Read", "Grep", "Glob")


def test_yaml_list_tools_are_used_directly(tmp_path: Path) -> None:
    spec = agent(tmp_path, "tools:\n  - Read\n  - ' Grep'\n")

    assert spec.tools == ("Read", "Grep")


def test_tools_absent_is_none(tmp_path: Path) -> None:
    spec = agent(tmp_path, "description: d\n")

    assert spec.tools is None
    assert spec.disallowed_tools is None


@pytest.mark.parametrize("value", ["3", "{Read: true}", "[Read, 3]"])
def test_tools_of_another_type_are_malformed(tmp_path: Path, value: str) -> None:
    with pytest.raises(AgentDefinitionError, match="tools"):
        agent(tmp_path, f"tools: {value}\n")


@pytest.mark.spec("S001-37")
def test_disallowed_tools_are_set_and_denied_even_when_listed_in_tools(tmp_path: Path) -> None:
    spec = agent(tmp_path, "tools: Read, Bash, Edit\ndisallowedTools: Bash , WebSearch\n")

    assert spec.disallowed_tools == ("Bash", "WebSearch")
    assert effective_tools(spec, structured_output=False) == ("Read", "Edit")


@pytest.mark.spec("S001-38")
def test_model_defaults_to_inherit(tmp_path: Path) -> None:
    assert agent(tmp_path, "description: d\n").model == "inherit"


def test_model_is_copied_when_present(tmp_path: Path) -> None:
    assert agent(tmp_path, "model: opus\n").model == "opus"


def test_description_absent_is_empty_and_non_string_is_malformed(tmp_path: Path) -> None:
    assert agent(tmp_path, "model: opus\n").description == ""
    with pytest.raises(AgentDefinitionError, match="description must be a string"):
        agent(tmp_path, "description: [a, b]\n")


def test_empty_frontmatter_gives_defaults(tmp_path: Path) -> None:
    write_agent(tmp_path, "reviewer", "---\n---\nReview.\n")

    assert load_agent_definition(tmp_path, "reviewer", []) == AgentSpec(
        role="reviewer", description="", prompt="Review."
    )


def test_crlf_file_parses_like_lf(tmp_path: Path) -> None:
    write_agent(tmp_path, "planner", b"---\r\ntools: Read\r\n---\r\nPlan.\r\n")

    spec = load_agent_definition(tmp_path, "planner", [])

    assert (spec.tools, spec.prompt) == (("Read",), "Plan.")


def test_definition_is_read_fresh_on_every_call(tmp_path: Path) -> None:
    write_agent(tmp_path, "planner", "---\nmodel: opus\n---\nOld.\n")
    first = load_agent_definition(tmp_path, "planner", [])
    write_agent(tmp_path, "planner", "---\nmodel: sonnet\n---\nNew.\n")

    second = load_agent_definition(tmp_path, "planner", [])

    assert (first.model, first.prompt) == ("opus", "Old.")
    assert (second.model, second.prompt) == ("sonnet", "New.")


# ---------------------------------------------------------------------------- bad files


@pytest.mark.spec("S001-06")
def test_missing_definition_file_raises(tmp_path: Path) -> None:
    expected = str(tmp_path / ".claude" / "agents" / "planner.md")
    with pytest.raises(AgentDefinitionError, match="not found") as info:
        load_agent_definition(tmp_path, "planner", [])
    assert expected in str(info.value)


def test_unreadable_definition_file_raises(tmp_path: Path) -> None:
    (tmp_path / ".claude" / "agents" / "planner.md").mkdir(parents=True)

    with pytest.raises(AgentDefinitionError, match="cannot read agent definition"):
        load_agent_definition(tmp_path, "planner", [])


def test_definition_file_that_is_not_utf8_raises(tmp_path: Path) -> None:
    write_agent(tmp_path, "planner", b"---\nmodel: \xff\n---\nx\n")

    with pytest.raises(AgentDefinitionError, match="cannot read agent definition"):
        load_agent_definition(tmp_path, "planner", [])


@pytest.mark.spec("S001-07")
@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("---\ntools: [Read, Grep\n---\nx\n", "malformed YAML frontmatter"),
        ("---\nmodel: opus\n  bad: indent\n---\nx\n", "malformed YAML frontmatter"),
        ("---\nwhen: 2024-13-45\n---\nx\n", "malformed YAML frontmatter"),
        ("---\n- Read\n- Grep\n---\nx\n", "frontmatter is a list, expected a mapping"),
        ("---\njust a string\n---\nx\n", "frontmatter is a str, expected a mapping"),
        ("You are an agent.\n", "no YAML frontmatter"),
        ("---\nmodel: opus\nYou are an agent.\n", "no closing '---' line"),
    ],
)
def test_malformed_definition_file_raises_naming_file_and_problem(
    tmp_path: Path, text: str, what: str
) -> None:
    path = write_agent(tmp_path, "reviewer", text)

    with pytest.raises(AgentDefinitionError, match=re.escape(what)) as info:
        load_agent_definition(tmp_path, "reviewer", [])
    assert str(path) in str(info.value)


@pytest.mark.parametrize("role", ["../planner", "a/b", ".hidden", ""])
def test_role_that_is_not_a_plain_name_is_rejected(tmp_path: Path, role: str) -> None:
    with pytest.raises(AgentDefinitionError, match="invalid agent role"):
        load_agent_definition(tmp_path, role, [])


# ---------------------------------------------------------------------------- project context


@pytest.mark.spec("S001-09")
def test_context_files_are_appended_with_double_newlines(tmp_path: Path) -> None:
    write_agent(tmp_path, "implementor", "---\nmodel: opus\n---\nBe careful.\n")
    (tmp_path / ".claude" / "CLAUDE.md").write_text("Use ruff.\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "style.md").write_text("Small functions.", encoding="utf-8")

    spec = load_agent_definition(tmp_path, "implementor", [".claude/CLAUDE.md", "docs/style.md"])

    assert spec.prompt == "Be careful.\n\nUse ruff.\n\n\nSmall functions."


@pytest.mark.spec("S001-10")
def test_empty_context_paths_leave_the_prompt_as_is(tmp_path: Path) -> None:
    write_agent(tmp_path, "implementor", "---\nmodel: opus\n---\nBe careful.\n")

    assert load_agent_definition(tmp_path, "implementor", []).prompt == "Be careful."


@pytest.mark.spec("S001-11")
def test_unreadable_context_file_raises_context_error(tmp_path: Path) -> None:
    write_agent(tmp_path, "implementor", "---\nmodel: opus\n---\nBe careful.\n")

    with pytest.raises(ContextError, match=re.escape("docs/missing.md")) as info:
        load_agent_definition(tmp_path, "implementor", ["docs/missing.md"])
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_project_context_is_read_fresh(tmp_path: Path) -> None:
    ctx = tmp_path / "CLAUDE.md"
    ctx.write_text("one", encoding="utf-8")
    first = load_project_context(tmp_path, ["CLAUDE.md"])
    ctx.write_text("two", encoding="utf-8")

    assert (first, load_project_context(tmp_path, ["CLAUDE.md"])) == ("one", "two")


# ---------------------------------------------------------------------------- effective tools


def spec_with(tools: tuple[str, ...] | None, denied: tuple[str, ...] | None = None) -> AgentSpec:
    return AgentSpec(
        role="reviewer", description="", prompt="", tools=tools, disallowed_tools=denied
    )


def test_structured_output_is_added_to_an_allowlist_when_a_schema_is_set() -> None:
    spec = spec_with(("Read", "Grep"))

    assert effective_tools(spec, structured_output=True) == ("Read", "Grep", "StructuredOutput")
    assert effective_tools(spec, structured_output=False) == ("Read", "Grep")


def test_structured_output_is_not_duplicated() -> None:
    spec = spec_with(("StructuredOutput", "Read"))

    assert effective_tools(spec, structured_output=True) == ("StructuredOutput", "Read")


def test_no_allowlist_stays_none() -> None:
    assert effective_tools(spec_with(None, ("Bash",)), structured_output=True) is None


def test_structured_output_wins_over_disallowed_tools_when_a_schema_is_set() -> None:
    spec = spec_with(("Read",), ("StructuredOutput", "Bash"))

    assert effective_tools(spec, structured_output=True) == ("Read", "StructuredOutput")
    assert effective_disallowed_tools(spec, structured_output=True) == ("Bash",)
    assert effective_disallowed_tools(spec, structured_output=False) == (
        "StructuredOutput",
        "Bash",
    )
    assert effective_disallowed_tools(spec_with(None), structured_output=True) is None


# ---------------------------------------------------------------------------- shipped agents


@pytest.mark.parametrize("role", AGENT_ROLES)
def test_shipped_agent_definitions_load_with_structured_output(role: str) -> None:
    spec = load_agent_definition(REPO_ROOT, role, [".claude/CLAUDE.md"])

    assert spec.description
    assert spec.max_turns is not None
    tools = effective_tools(spec, structured_output=True)
    assert tools is not None
    assert STRUCTURED_OUTPUT_TOOL in tools
    assert not set(tools) & set(spec.disallowed_tools or ())
    claude_md = (REPO_ROOT / ".claude" / "CLAUDE.md").read_text(encoding="utf-8")
    assert spec.prompt.endswith("\n\n" + claude_md)


def test_only_runtime_adapters_import_frontmatter() -> None:
    # Conventions: the vendor library stays in adapters/runtime (agents.py, the SDK adapter).
    importers = {
        path.relative_to(REPO_ROOT).as_posix()
        for package in ("domain", "actors", "adapters")
        for path in (REPO_ROOT / package).rglob("*.py")
        if re.search(r"^\s*(import|from)\s+frontmatter\b", path.read_text("utf-8"), re.M)
    }

    assert importers
    assert all(p.startswith("adapters/runtime/") for p in importers), importers
