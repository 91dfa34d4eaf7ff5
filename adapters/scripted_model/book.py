"""Book files: the scenarios one scripted model plays, in the order it tries them, in one file.

The format is documented in docs/scripted-model.md::

    {
      "description": "what the book plays",            // optional
      "scenarios": [                                   // at least one, tried in this order
        {"name": "approve", "match": {...}, "turns": [...]},   // a scenario, as in a file
        {"use": "review", "match": {"role": "reviewer"}}       // a shipped scenario, or a
      ]                                                        // file (relative to the book)
    }

A scenario file (an object with ``turns``) is a book of that one scenario. Every problem is a
``ConfigError`` naming the file and the place in it (``scenarios[1].turns[0][1].input``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from adapters.scripted_model.scenario import (
    Block,
    HangBlock,
    Scenario,
    ToolBlock,
    load_scenario,
    parse_scenario,
)
from domain.errors import ConfigError

DEFAULT_BOOK = "one_file"
_BOOK_KEYS = ("description", "scenarios")
_USE_KEYS = ("use", "match")


@dataclass(frozen=True)
class Book:
    """The scenarios of ``source`` in book order (the first whose match holds plays)."""

    source: str
    description: str
    scenarios: tuple[Scenario, ...]

    def describe(self) -> list[str]:
        """What the book plays, scenario by scenario and turn by turn, for a person."""
        lines = [f"book {self.source}" + (f": {self.description}" if self.description else "")]
        lines.append(f"the first of its {len(self.scenarios)} scenario(s) whose match holds plays:")
        for n, scenario in enumerate(self.scenarios, 1):
            lines.append(f"{n}. {scenario.name} (match: {scenario.match.describe()})")
            if scenario.description:
                lines.append(f"   {scenario.description}")
            for t, turn in enumerate(scenario.turns, 1):
                lines.append(f"   turn {t}: " + ", ".join(_block(block) for block in turn))
            if scenario.after_last == "repeat":
                lines.append("   then the last turn again, forever")
            else:
                lines.append(f"   then {scenario.final_text!r} and the conversation ends")
        return lines


def load_book(path: str | Path | None = None) -> Book:
    """The book in the file at ``path``; None: the shipped example (``books/one_file.json``)."""
    if path is None:
        source = f"books/{DEFAULT_BOOK}.json"
        text = resources.files(__package__).joinpath(source).read_text(encoding="utf-8")
        return parse_book(_json(text, source), source=source, base=None)
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read the book: {exc.strerror or exc}",
            key_path=str(file),
            expected="a JSON book file (docs/scripted-model.md)",
        ) from exc
    return parse_book(_json(text, str(file)), source=str(file), base=file.parent)


def parse_book(data: object, *, source: str, base: Path | None) -> Book:
    """``data`` (a book's JSON) as a ``Book``; ``base``: where ``use`` paths are relative to
    (None: only shipped scenarios may be used)."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"a book is a JSON object, not {_kind(data)}",
            key_path=source,
            expected='{"scenarios": [...]} or one scenario {"turns": [...]}',
        )
    if "turns" in data:  # one scenario file
        scenario = parse_scenario({"name": Path(source).stem, **data}, source=source)
        return Book(source, scenario.description, (scenario,))
    unknown = sorted(set(data) - set(_BOOK_KEYS))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(map(repr, unknown))}",
            key_path=source,
            expected=f"only {', '.join(_BOOK_KEYS)} (or a scenario's keys, with turns)",
        )
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"not a string: {_kind(description)}", key_path=f"{source}: description")
    entries = data.get("scenarios")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(
            "missing or empty" if not entries else f"not a list: {_kind(entries)}",
            key_path=f"{source}: scenarios",
            expected="a list of one or more scenarios",
        )
    scenarios: list[Scenario] = []
    for index, entry in enumerate(entries):
        where = f"{source}: scenarios[{index}]"
        scenario = _entry(entry, where, base)
        taken = next((i for i, s in enumerate(scenarios) if s.name == scenario.name), None)
        if taken is not None:
            raise ConfigError(
                f"the name {scenario.name!r} is taken by scenarios[{taken}]",
                key_path=where,
                expected="a name of its own (the server's log names the scenario it plays)",
            )
        scenarios.append(scenario)
    return Book(source, description, tuple(scenarios))


def _entry(entry: object, where: str, base: Path | None) -> Scenario:
    if not isinstance(entry, Mapping):
        raise ConfigError(
            f"not an object: {_kind(entry)}",
            key_path=where,
            expected='a scenario {"name", "match", "turns"} or {"use": NAME, "match": {...}}',
        )
    if "use" not in entry:
        if "name" not in entry:
            raise ConfigError(
                "a scenario in a book needs a name",
                key_path=where,
                expected='"name": "..." (the server\'s log names the scenario it plays)',
            )
        return parse_scenario(entry, source=where)
    extra = sorted(set(entry) - set(_USE_KEYS))
    if extra:
        raise ConfigError(
            f"a 'use' entry has unknown key(s) {', '.join(map(repr, extra))}",
            key_path=where,
            expected="only use and match",
        )
    used = entry["use"]
    if not isinstance(used, str) or not used:
        raise ConfigError(
            f"use: not a scenario name or file: {_kind(used)}",
            key_path=where,
            expected="a shipped scenario's name (approve, review …) or a .json file",
        )
    is_file = used.endswith(".json") or "/" in used
    if is_file and base is None:
        raise ConfigError(
            f"use {used!r}: the shipped book uses shipped scenarios only", key_path=where
        )
    try:
        scenario = load_scenario(base / used) if is_file and base else load_scenario(used)
    except ConfigError as exc:
        raise ConfigError(f"use {used!r}: {exc}", key_path=where) from exc
    if "match" not in entry:
        return scenario
    return parse_scenario({**scenario.model_dump(), "match": entry["match"]}, source=where)


def _json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", key_path=source
        ) from exc


def _kind(value: object) -> str:
    return {
        list: "a list",
        dict: "an object",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _block(block: Block) -> str:
    """One block in a few words: ``text``, ``Write {cwd}/a.py``, ``StructuredOutput approve``."""
    if isinstance(block, HangBlock):
        return "hang"
    if not isinstance(block, ToolBlock):
        return "text"
    given = block.input
    if block.tool == "StructuredOutput":
        review = given.get("review")
        detail = given.get("outcome") or (
            review.get("verdict") if isinstance(review, dict) else None
        )
        if isinstance(given.get("create"), list):
            detail = f"plan: {len(given['create'])} item(s) to create"
    else:
        detail = given.get("file_path") or given.get("command")
    return f"{block.tool} {detail}" if isinstance(detail, str) else block.tool
