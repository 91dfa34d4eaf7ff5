"""Agent definitions: ``.claude/agents/<role>.md`` at the repository root, plus project context.

Agent definition loading and project context injection (docs/contract.md, S001-34 to S001-38 and
S001-09 to S001-11). The file is read fresh on every call (no cache), so an edit takes effect at the
next run. Besides the Claude SDK adapter, this is the only module that imports ``frontmatter`` (the
layering rule: vendor libraries stay in their adapter).

Decisions the contract leaves open:

- The frontmatter must be there, closed, and a YAML mapping: a file without it, with a list or
  a scalar instead, or with YAML that does not parse is ``AgentDefinitionError``. (The library's
  own ``frontmatter.loads`` silently drops a non-mapping frontmatter, so the handler is used
  directly.) Unknown keys (``name``, ``hooks``, ``permissionMode`` …) are ignored: the adapter
  configures hooks and permissions itself.
- ``description`` may be absent (empty string): the adapter selects the agent by name, so the
  description is never used to choose one. Present, it must be a string.
- ``tools`` / ``disallowedTools``: a comma-separated string or a YAML list of strings; entries
  are trimmed, empty entries dropped, duplicates dropped (first one kept). Absent or null means
  None (the SDK default: all tools / nothing denied). Matching is by exact name.
- ``maxTurns``: an integer, or a string holding one, of at least 1. Anything else is malformed.
- The body is stripped of surrounding whitespace (as python-frontmatter does). Each context
  file is appended exactly as it is on disk, after ``"\\n\\n"``, in ``context_paths`` order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from frontmatter.default_handlers import YAMLHandler

from domain.errors import AgentDefinitionError, ContextError

__all__ = [
    "AgentSpec",
    "STRUCTURED_OUTPUT_TOOL",
    "agent_definition_path",
    "effective_disallowed_tools",
    "effective_tools",
    "load_agent_definition",
    "load_project_context",
]

STRUCTURED_OUTPUT_TOOL = "StructuredOutput"
"""The tool through which the CLI takes a schema-bound final answer (observed on CLI 2.1.330)."""

_ROLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_INTEGER = re.compile(r"\s*\+?[0-9]+\s*")


@dataclass(frozen=True)
class AgentSpec:
    """One role's agent definition as the SDK adapter needs it.

    ``prompt`` is the file's body with the project context already appended. ``max_turns`` is a
    session option (``query(maxTurns=...)``), not part of the SDK's ``AgentDefinition``.
    """

    role: str
    description: str
    prompt: str
    tools: tuple[str, ...] | None = None
    disallowed_tools: tuple[str, ...] | None = None
    model: str = "inherit"
    max_turns: int | None = None


def agent_definition_path(repo_root: Path, role: str) -> Path:
    """Where the definition of ``role`` lives: ``<repo_root>/.claude/agents/<role>.md``."""
    # The role becomes a file name: a separator or a leading dot would read another file.
    if not _ROLE.fullmatch(role):
        raise AgentDefinitionError(f"invalid agent role {role!r}: expected a plain name")
    return repo_root / ".claude" / "agents" / f"{role}.md"


def load_agent_definition(repo_root: Path, role: str, context_paths: Sequence[str]) -> AgentSpec:
    """Read and parse the agent file of ``role`` and append the project context to its prompt.

    Raises ``AgentDefinitionError`` when the file is missing, unreadable or malformed, and
    ``ContextError`` when a context file cannot be read.
    """
    path = agent_definition_path(repo_root, role)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise AgentDefinitionError(f"{path}: agent definition file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentDefinitionError(f"{path}: cannot read agent definition: {exc}") from exc
    meta, body = _parse(path, text)
    context = load_project_context(repo_root, context_paths)
    return AgentSpec(
        role=role,
        description=_optional_str(path, meta, "description") or "",
        prompt=f"{body}\n\n{context}" if context_paths else body,
        tools=_tool_list(path, meta, "tools"),
        disallowed_tools=_tool_list(path, meta, "disallowedTools"),
        model=_optional_str(path, meta, "model") or "inherit",
        max_turns=_max_turns(path, meta),
    )


def load_project_context(repo_root: Path, context_paths: Sequence[str]) -> str:
    """The context files' contents (paths relative to ``repo_root``, UTF-8) joined by a blank
    line; ``""`` for no paths. ``ContextError`` names the first file that cannot be read."""
    parts: list[str] = []
    for rel in context_paths:
        try:
            parts.append((repo_root / rel).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ContextError(f"cannot read project context file {rel}: {exc}") from exc
    return "\n\n".join(parts)


def effective_tools(spec: AgentSpec, *, structured_output: bool) -> tuple[str, ...] | None:
    """The allowlist to give the SDK: ``tools`` minus ``disallowed_tools``, plus
    ``StructuredOutput`` when a schema is set.

    None (no allowlist: the agent inherits every tool) stays None, since the CLI then offers
    ``StructuredOutput`` by itself. With an allowlist it filters that tool out unless named,
    and the run ends "successfully" without output (observed on CLI 2.1.330), so it is always
    added — even over ``disallowedTools``: a run that cannot answer can only fail.
    """
    if spec.tools is None:
        return None
    denied = set(spec.disallowed_tools or ())
    tools = [t for t in spec.tools if t not in denied]
    if structured_output and STRUCTURED_OUTPUT_TOOL not in tools:
        tools.append(STRUCTURED_OUTPUT_TOOL)
    return tuple(tools)


def effective_disallowed_tools(
    spec: AgentSpec, *, structured_output: bool
) -> tuple[str, ...] | None:
    """``disallowed_tools`` as the SDK should get it: without ``StructuredOutput`` when a
    schema is set (see :func:`effective_tools`)."""
    if spec.disallowed_tools is None or not structured_output:
        return spec.disallowed_tools
    return tuple(t for t in spec.disallowed_tools if t != STRUCTURED_OUTPUT_TOOL)


# ---------------------------------------------------------------------------- parsing


def _parse(path: Path, text: str) -> tuple[Mapping[str, object], str]:
    handler = YAMLHandler()
    # Same normalisation as frontmatter.loads: CRLF files and a leading BOM or blank lines.
    text = text.replace("\r\n", "\n").lstrip("\ufeff").strip()
    if not handler.detect(text):
        raise AgentDefinitionError(f"{path}: no YAML frontmatter (expected a leading '---' line)")
    try:
        raw, body = handler.split(text)
    except ValueError as exc:
        raise AgentDefinitionError(f"{path}: frontmatter has no closing '---' line") from exc
    try:
        meta = handler.load(raw)
    # PyYAML raises YAMLError for bad syntax but ValueError/TypeError from its constructors
    # (an impossible date, an unhashable key), and ships no stubs to name YAMLError by: any
    # failure to parse this text means the file is malformed.
    except Exception as exc:
        raise AgentDefinitionError(f"{path}: malformed YAML frontmatter: {exc}") from exc
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise AgentDefinitionError(
            f"{path}: frontmatter is a {type(meta).__name__}, expected a mapping of fields"
        )
    return meta, body.strip()


def _optional_str(path: Path, meta: Mapping[str, object], key: str) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise AgentDefinitionError(f"{path}: {key} must be a string, got {type(value).__name__}")
    return value.strip()


def _tool_list(path: Path, meta: Mapping[str, object], key: str) -> tuple[str, ...] | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        items: list[object] = list(value.split(","))
    elif isinstance(value, list):
        items = list(value)
    else:
        raise AgentDefinitionError(
            f"{path}: {key} must be a comma-separated string or a list of strings, "
            f"got {type(value).__name__}"
        )
    names: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise AgentDefinitionError(
                f"{path}: {key} entries must be strings, got {type(item).__name__} {item!r}"
            )
        name = item.strip()
        if name and name not in names:
            names.append(name)
    return tuple(names)


def _max_turns(path: Path, meta: Mapping[str, object]) -> int | None:
    value = meta.get("maxTurns")
    if value is None:
        return None
    turns: int | None = None
    # bool is an int to Python, but `maxTurns: yes` is not a number of turns.
    if isinstance(value, int) and not isinstance(value, bool):
        turns = value
    elif isinstance(value, str) and _INTEGER.fullmatch(value):
        turns = int(value.strip())
    if turns is None or turns < 1:
        raise AgentDefinitionError(f"{path}: maxTurns must be a positive integer, got {value!r}")
    return turns
