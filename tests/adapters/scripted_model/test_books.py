"""Book files as a user meets them: ``cpe scripted-model check|serve --book`` and ``cpe run
--scripted`` as real processes (docs/scripted-model.md), and the server's no-usage answers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from adapters.scripted_model import ScriptedModelServer, load_scenario
from adapters.scripted_model.book import load_book
from domain.results import output_schema, validate_output
from tests.adapters.runtime.prompt.test_context import Setup, implementor
from tests.adapters.runtime.prompt.test_context import item as context_item
from tests.adapters.scripted_model.scripted_cli import call, cli_request, parse_sse, play
from tests.e2e.running import CPE, run_command


def cpe(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_command([str(CPE), *args], home=cwd)


def write_book(path: Path, scenarios: list[Any], **fields: Any) -> Path:
    path.write_text(json.dumps({"scenarios": scenarios, **fields}), encoding="utf-8")
    return path


def test_check_prints_the_shipped_books_scenarios_in_the_order_they_are_tried(
    tmp_path: Path,
) -> None:
    result = cpe("scripted-model", "check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("book books/one_file.json: Implement what a work item says")
    numbered = [line.split(" (match")[0] for line in lines if line[:1].isdigit()]
    assert numbered == [
        "1. plan_nothing",
        "2. write_the_named_file",
        "3. write_the_item_down",
        "4. approve",
    ]
    assert "   turn 2: text, Write {cwd}/{path}" in lines
    assert "   turn 1: StructuredOutput approve" in lines


# (book text, the place the error names, what it says is wrong)
MALFORMED = {
    "a block without input": (
        {"scenarios": [{"name": "a", "turns": [[{"tool": "Write"}]]}]},
        "scenarios[0]: turns[0][0].input",
        "Field required",
    ),
    "an unknown placeholder": (
        {"scenarios": [{"name": "a", "turns": [[{"text": "{item}"}]]}]},
        "scenarios[0]: turns[0][0].text",
        "unknown placeholder {item}",
    ),
    "two scenarios of one name": (
        {"scenarios": [{"use": "approve"}, {"use": "approve"}]},
        "scenarios[1]",
        "the name 'approve' is taken by scenarios[0]",
    ),
    "a scenario without a name": (
        {"scenarios": [{"turns": [[{"text": "hi"}]]}]},
        "scenarios[0]",
        "a scenario in a book needs a name",
    ),
    "a misspelt key": (
        {"scenario": []},
        "",
        "unknown key(s) 'scenario'",
    ),
    "no scenarios": ({"scenarios": []}, "scenarios", "missing or empty"),
    "an unknown shipped scenario": (
        {"scenarios": [{"use": "aprove"}]},
        "scenarios[0]",
        "no shipped scenario 'aprove'",
    ),
    "a bad match rule": (
        {"scenarios": [{"use": "approve", "match": {"prompt": "(unclosed"}}]},
        "scenarios[0]: match.prompt",
        "not a regular expression",
    ),
}


@pytest.mark.parametrize("problem", list(MALFORMED))
@pytest.mark.parametrize(
    "command",
    [("scripted-model", "check", "--book"), ("scripted-model", "serve", "--book")],
    ids=["check", "serve"],
)
def test_a_malformed_book_is_one_line_naming_the_file_and_the_place_exit_2(
    tmp_path: Path, command: tuple[str, ...], problem: str
) -> None:
    data, place, wrong = MALFORMED[problem]
    book = tmp_path / "my-book.json"
    book.write_text(json.dumps(data), encoding="utf-8")
    result = cpe(*command, str(book), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"cpe: scripted model: {book}: {place}"), line
    assert wrong in line


def test_cpe_run_scripted_refuses_a_malformed_book_before_anything_starts(
    tmp_path: Path,
) -> None:
    book = tmp_path / "book.json"
    book.write_text('{"scenarios": [\n  {"name": "a",}\n]}', encoding="utf-8")
    result = cpe("run", "--repo", str(tmp_path), "--scripted", str(book), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"cpe: scripted model: {book}: not JSON: Expecting property name enclosed in double "
        "quotes (line 2, column 16)"
    )
    assert not (tmp_path / ".cpe").exists()


def test_a_missing_book_file_names_it(tmp_path: Path) -> None:
    result = cpe("scripted-model", "check", "--book", "nowhere.json", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "cpe: scripted model: nowhere.json: cannot read the book: No such file or directory; "
        "expected a JSON book file (docs/scripted-model.md)"
    )


def test_a_book_uses_shipped_scenarios_and_files_beside_it_under_its_own_match(
    tmp_path: Path,
) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "look.json").write_text(
        json.dumps({"turns": [[{"tool": "Bash", "input": {"command": "ls"}}]]}), encoding="utf-8"
    )
    book = write_book(
        tmp_path / "book.json",
        [
            {"use": "parts/look.json", "match": {"role": "implementor", "prompt": "look"}},
            {"use": "review", "match": {"role": "reviewer", "prompt": "^first"}},
            {"use": "approve"},
        ],
        description="mine",
    )
    result = cpe("scripted-model", "check", "--book", str(book), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    numbered = [line for line in result.stdout.splitlines() if line[:1].isdigit()]
    assert numbered == [
        "1. look (match: role='implementor', prompt='look')",
        "2. review (match: role='reviewer', prompt='^first')",
        "3. approve (match: role='reviewer')",
    ]
    assert result.stdout.startswith(f"book {book}: mine\n")


def test_a_scenario_file_is_a_book_of_one(tmp_path: Path) -> None:
    scenario = tmp_path / "just-this.json"
    scenario.write_text(json.dumps({"turns": [[{"text": "hi"}]]}), encoding="utf-8")
    result = cpe("scripted-model", "check", "--book", str(scenario), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    numbered = [line for line in result.stdout.splitlines() if line[:1].isdigit()]
    assert numbered == ["1. just-this (match: anything)"]


def test_the_shipped_books_outputs_are_valid_for_their_roles() -> None:
    for scenario in load_book().scenarios:
        for given in scenario.tool_inputs("StructuredOutput"):
            validate_output(given["role"], given)


NO_TOKENS = {
    "input_tokens": 0,
    "output_tokens": 0,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
}


def test_without_usage_every_answer_reports_zero_tokens_on_both_wires() -> None:
    with ScriptedModelServer([load_scenario("approve")], report_usage=False) as server:
        review = cli_request(role="reviewer", stream=True)
        status, data = call(server, review)
        assert status == 200, data
        events = dict(parse_sse(data))
        assert events["message_start"]["message"]["usage"] == NO_TOKENS
        assert events["message_delta"]["usage"] == {"output_tokens": 0}
        status, data = call(server, cli_request(role="reviewer", stream=False))
        assert status == 200
        assert json.loads(data)["usage"] == NO_TOKENS
        codex = {
            "model": "gpt-test",
            "input": [{"type": "message", "role": "user", "content": "Review."}],
            "tools": [{"type": "function", "name": "exec_command", "parameters": {}}],
            "text": {"format": {"type": "json_schema", "schema": output_schema("reviewer")}},
        }
        status, data = call(server, codex, path="/v1/responses")
        assert status == 200, data
        usage = json.loads(data)["usage"]
        assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (0, 0, 0)


@pytest.mark.parametrize("wid", ["7", "ENG-12"], ids=["a number", "a tracker key"])
def test_the_shipped_book_writes_the_file_an_item_names_whatever_its_id(wid: str) -> None:
    # An implementor's prompt as cpe assembles it, for an item of the local tracker, GitHub or
    # GitLab (a number) and of Linear or Jira (a key): the shipped book plays both (it matched
    # numbers only, and every implementor run on a Linear item failed: "no scenario matches").
    s = Setup({"work_items": {wid: context_item(wid, "Add a guide", "pending")}})
    s.tracker.bodies[wid] = "file: docs/GUIDE.md\nRead me first."
    prompt = implementor(s, wid)
    assert prompt.startswith(f"## Work Item #{wid} — Add a guide\n")
    with ScriptedModelServer(load_book().scenarios) as server:
        content, _ = play(server, cli_request(prompt, cwd="/srv/repo"))
    assert content == [
        (
            "text",
            f"Work item #{wid} asks for docs/GUIDE.md. I'll read it first, in case it exists.",
        ),
        ("tool_use", "Read", {"file_path": "/srv/repo/docs/GUIDE.md"}),
    ]
