"""Scenario files: the model, loading with clear errors, matching and turn rendering.

The format is documented in docs/scripted-model-wire.md (book files: docs/scripted-model.md).
Everything here is pure: the server feeds it a ``Conversation`` read from a request and gets
back the blocks to send.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from domain.errors import ConfigError

# ``{name}`` is a placeholder; ``{{name}}`` renders as a literal ``{name}``. Nothing else is
# touched, so code and JSON in file contents (``{"a": {"b": 1}}``) need no escaping.
_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_]\w*)\}\}|\{([A-Za-z_]\w*)\}")
BUILTIN_VARIABLES = frozenset({"cwd"})


class ScriptError(Exception):
    """A request the book cannot answer: no scenario matches, or a template has no value."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextBlock(_Model):
    """Assistant text."""

    text: str = Field(min_length=1)


class ToolBlock(_Model):
    """A ``tool_use`` of ``tool`` with ``input``; strings in ``input`` are templates."""

    tool: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_\-]+$")
    input: dict[str, Any]


class HangBlock(_Model):
    """Hold the response open, sending nothing more, until the client or the server goes."""

    hang: Literal[True]


def _block_kind(value: Any) -> str | None:
    if isinstance(value, Mapping):
        return next((key for key in ("text", "tool", "hang") if key in value), None)
    for kind, model in (("text", TextBlock), ("tool", ToolBlock), ("hang", HangBlock)):
        if isinstance(value, model):
            return kind
    return None


Block = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ToolBlock, Tag("tool")]
    | Annotated[HangBlock, Tag("hang")],
    Discriminator(
        _block_kind,
        custom_error_type="invalid_block",
        custom_error_message=(
            'a block is {"text": "..."}, {"tool": "Name", "input": {...}} or {"hang": true}'
        ),
    ),
]


class Match(_Model):
    """Which conversations a scenario plays; every rule given must hold (none: all match).

    ``role`` compares with the role the ``StructuredOutput`` tool's schema pins
    (``properties.role.const``, as ``domain.results.output_schema`` makes it); ``system`` and
    ``prompt`` are regular expressions searched (``re.search``) in the system prompt and in the
    first user message. Their named groups become template variables.
    """

    role: str | None = None
    system: str | None = None
    prompt: str | None = None

    @field_validator("system", "prompt")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from exc
        return pattern

    @model_validator(mode="after")
    def _groups_are_free(self) -> Match:
        clash = self.variables() & BUILTIN_VARIABLES
        if clash:
            raise ValueError(f"named groups {sorted(clash)} would shadow built-in variables")
        return self

    def variables(self) -> frozenset[str]:
        names: set[str] = set()
        for pattern in (self.system, self.prompt):
            if pattern is not None:
                names.update(re.compile(pattern).groupindex)
        return frozenset(names)

    def describe(self) -> str:
        rules = [f"{key}={value!r}" for key, value in self.model_dump().items() if value]
        return ", ".join(rules) or "anything"


class Scenario(_Model):
    """A scripted assistant: one list of blocks per turn."""

    name: str = Field(min_length=1)
    description: str = ""
    match: Match = Match()
    turns: tuple[Annotated[tuple[Block, ...], Field(min_length=1)], ...] = Field(min_length=1)
    after_last: Literal["end", "repeat"] = "end"
    final_text: str = Field(default="Done.", min_length=1)

    @model_validator(mode="after")
    def _well_formed(self) -> Scenario:
        known = BUILTIN_VARIABLES | self.match.variables()
        for t, turn in enumerate(self.turns):
            for b, block in enumerate(turn):
                where = f"turns[{t}][{b}]"
                if isinstance(block, HangBlock) and b != len(turn) - 1:
                    raise ValueError(f"{where}: a hang must be the last block of its turn")
                for path, text in _strings(block):
                    for name in _placeholders(text):
                        if name not in known:
                            raise ValueError(
                                f"{where}{path}: unknown placeholder {{{name}}}; known: "
                                f"{', '.join(sorted(known))} (write {{{{{name}}}}} for a "
                                f"literal {{{name}}})"
                            )
        return self

    def tool_inputs(self, tool: str) -> tuple[dict[str, Any], ...]:
        """The (unrendered) inputs of every call of ``tool``, in order."""
        return tuple(
            block.input
            for turn in self.turns
            for block in turn
            if isinstance(block, ToolBlock) and block.tool == tool
        )

    def with_match(self, match: Match) -> Scenario:
        """This scenario under another match rule (re-validated: templates may use its groups)."""
        return Scenario.model_validate({**self.model_dump(), "match": match.model_dump()})


@dataclass(frozen=True)
class Conversation:
    """What a scenario is chosen and rendered by, as read from one Messages API request."""

    system: str
    prompt: str
    role: str | None
    cwd: str | None
    assistant_turns: int


def select(book: Sequence[Scenario], conversation: Conversation) -> tuple[Scenario, dict[str, str]]:
    """The first scenario of ``book`` matching ``conversation``, and its template variables."""
    for scenario in book:
        variables = _match(scenario.match, conversation)
        if variables is not None:
            return scenario, variables
    tried = "; ".join(f"{s.name} ({s.match.describe()})" for s in book) or "none"
    raise ScriptError(
        f"scripted model: no scenario matches this conversation (role={conversation.role!r}, "
        f"system starts {conversation.system[:80]!r}, prompt starts "
        f"{conversation.prompt[:80]!r}); scenarios tried: {tried}"
    )


def next_turn(
    scenario: Scenario, conversation: Conversation, variables: Mapping[str, str]
) -> tuple[Block, ...]:
    """The rendered blocks of the turn after the conversation's ``assistant_turns``."""
    index = conversation.assistant_turns
    if index < len(scenario.turns):
        turn = scenario.turns[index]
    elif scenario.after_last == "repeat":
        turn = scenario.turns[-1]
    else:
        return (TextBlock(text=scenario.final_text),)
    values = dict(variables)
    if conversation.cwd is not None:
        values["cwd"] = conversation.cwd
    return tuple(_render_block(block, values, scenario.name) for block in turn)


def load_scenario(name_or_path: str | Path, *, match: Match | None = None) -> Scenario:
    """A shipped scenario by name (``"implement"``) or a scenario file by path.

    ``match`` replaces the file's rule. A file without ``name`` takes its stem. Raises
    ``ConfigError`` naming the file and the place in it that is wrong.
    """
    path = Path(name_or_path)
    if isinstance(name_or_path, str) and path.suffix != ".json" and len(path.parts) == 1:
        resource = resources.files(__package__).joinpath("scenarios", f"{name_or_path}.json")
        if not resource.is_file():
            raise ConfigError(
                f"no shipped scenario {name_or_path!r}",
                expected=f"one of {', '.join(shipped_scenarios())}",
            )
        source, text = f"scenarios/{name_or_path}.json", resource.read_text(encoding="utf-8")
    else:
        try:
            source, text = str(path), path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read scenario file: {exc}", key_path=str(path)) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc}", key_path=source) from exc
    if isinstance(data, dict):
        data.setdefault("name", Path(source).stem)
    scenario = parse_scenario(data, source=source)
    return scenario if match is None else scenario.with_match(match)


def parse_scenario(data: object, *, source: str = "<scenario>") -> Scenario:
    """``data`` as a ``Scenario``, or ``ConfigError`` with each problem's location."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(error) for error in exc.errors(include_url=False))
        raise ConfigError(problems, key_path=source) from exc


def shipped_scenarios() -> tuple[str, ...]:
    folder = resources.files(__package__).joinpath("scenarios")
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json")))


def _match(match: Match, conversation: Conversation) -> dict[str, str] | None:
    if match.role is not None and match.role != conversation.role:
        return None
    variables: dict[str, str] = {}
    for pattern, text in ((match.system, conversation.system), (match.prompt, conversation.prompt)):
        if pattern is None:
            continue
        found = re.search(pattern, text)
        if found is None:
            return None
        variables.update({k: v for k, v in found.groupdict().items() if v is not None})
    return variables


def _render_block(block: Block, values: Mapping[str, str], scenario: str) -> Block:
    if isinstance(block, TextBlock):
        return TextBlock(text=_render(block.text, values, scenario))
    if isinstance(block, ToolBlock):
        return ToolBlock(tool=block.tool, input=_render_value(block.input, values, scenario))
    return block


def _render_value(value: Any, values: Mapping[str, str], scenario: str) -> Any:
    if isinstance(value, str):
        return _render(value, values, scenario)
    if isinstance(value, list):
        return [_render_value(item, values, scenario) for item in value]
    if isinstance(value, dict):
        return {key: _render_value(item, values, scenario) for key, item in value.items()}
    return value


def _render(text: str, values: Mapping[str, str], scenario: str) -> str:
    def substitute(found: re.Match[str]) -> str:
        literal, name = found.groups()
        if literal is not None:
            return "{" + literal + "}"
        if name not in values:
            # Only ``cwd`` can be missing: match groups are always bound when the rule matched.
            raise ScriptError(
                f"scripted model: scenario {scenario!r} uses {{{name}}} but the request does not "
                "say it (the CLI reports the working directory as 'Primary working directory:')"
            )
        return values[name]

    return _PLACEHOLDER.sub(substitute, text)


def _placeholders(text: str) -> Iterator[str]:
    for literal, name in _PLACEHOLDER.findall(text):
        if not literal:
            yield name


def _strings(block: Block) -> Iterator[tuple[str, str]]:
    if isinstance(block, TextBlock):
        yield ".text", block.text
    elif isinstance(block, ToolBlock):
        yield from _walk(block.input, ".input")


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}")


def _problem(error: ErrorDetails) -> str:
    message = error["msg"].removeprefix("Value error, ")
    # The whole-scenario checks put the location into their message already.
    return f"{_location(error['loc'])}: {message}" if error["loc"] else message


def _location(loc: tuple[int | str, ...]) -> str:
    # Discriminated unions put the tag into the location ("turns", 0, 1, "tool", "input");
    # the tag only repeats what the block's own key says, so it is dropped.
    parts = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            parts += f"[{part}]"
        elif i == 3 and loc[0] == "turns" and part in ("text", "tool", "hang"):
            continue
        else:
            parts += f".{part}" if parts else part
    return parts
