"""Atlassian Document Format <-> Markdown: what Jira Cloud's v3 descriptions and comments read as,
and what cpe's Markdown is written as (adapters/providers/jira/adf.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.providers import markers
from adapters.providers.jira import adf, wiki


def doc(*content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "doc", "version": 1, "content": list(content)}


def para(*content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "paragraph", "content": list(content)}


def text(value: str, *marks: str, href: str | None = None) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "text", "text": value}
    kinds: list[dict[str, Any]] = [{"type": mark} for mark in marks]
    if href is not None:
        kinds.append({"type": "link", "attrs": {"href": href}})
    if kinds:
        node["marks"] = kinds
    return node


def item(*content: dict[str, Any]) -> dict[str, Any]:
    return {"type": "listItem", "content": list(content)}


# ------------------------------------------------------------------------------ Markdown -> ADF


def test_markdown_becomes_a_version_1_document_of_paragraphs_with_hard_breaks() -> None:
    assert adf.from_markdown("One line\nnext line\n\nSecond paragraph") == doc(
        para(text("One line"), {"type": "hardBreak"}, text("next line")),
        para(text("Second paragraph")),
    )
    assert adf.from_markdown("") == doc()


@pytest.mark.parametrize("level", [1, 2, 3, 4, 5, 6])
def test_every_heading_level_is_a_heading_node(level: int) -> None:
    assert adf.from_markdown("#" * level + " Title") == doc(
        {"type": "heading", "attrs": {"level": level}, "content": [text("Title")]}
    )


def test_emphasis_strike_code_and_links_are_marks_on_text() -> None:
    result = adf.from_markdown('**b** *i* ~~s~~ `c` [site](https://example.com "Home")')
    assert result == doc(
        para(
            text("b", "strong"),
            text(" "),
            text("i", "em"),
            text(" "),
            text("s", "strike"),
            text(" "),
            text("c", "code"),
            text(" "),
            {
                "type": "text",
                "text": "site",
                "marks": [
                    {"type": "link", "attrs": {"href": "https://example.com", "title": "Home"}}
                ],
            },
        )
    )


def test_nested_marks_are_all_on_the_text_and_code_keeps_only_a_link() -> None:
    """ADF's code mark combines with link alone (the schema's code_inline_node)."""
    result = adf.from_markdown("***both*** [**`x`**](https://e.x)")
    nodes = result["content"][0]["content"]
    assert {mark["type"] for mark in nodes[0]["marks"]} == {"strong", "em"}
    assert nodes[2] == {
        "type": "text",
        "text": "x",
        "marks": [{"type": "link", "attrs": {"href": "https://e.x"}}, {"type": "code"}],
    }


def test_code_blocks_keep_their_language_and_their_text_exactly() -> None:
    result = adf.from_markdown("```python\nif x:\n    print('```')\n```\n\n    indented\n")
    assert result == doc(
        {
            "type": "codeBlock",
            "attrs": {"language": "python"},
            "content": [text("if x:\n    print('```')")],
        },
        {"type": "codeBlock", "content": [text("indented")]},
    )


def test_lists_nest_and_an_ordered_list_keeps_its_start() -> None:
    result = adf.from_markdown("3. three\n4. four\n   - under four\n")
    assert result == doc(
        {
            "type": "orderedList",
            "attrs": {"order": 3},
            "content": [
                item(para(text("three"))),
                item(
                    para(text("four")),
                    {"type": "bulletList", "content": [item(para(text("under four")))]},
                ),
            ],
        }
    )


def test_a_checklist_is_a_task_list_with_states_and_ids() -> None:
    result = adf.from_markdown("- [ ] write it\n- [x] test it\n  - [ ] again\n")
    task_list = result["content"][0]
    assert task_list["type"] == "taskList"
    kinds = [(node["type"], node["attrs"].get("state")) for node in task_list["content"]]
    assert kinds == [("taskItem", "TODO"), ("taskItem", "DONE"), ("taskList", None)]
    assert task_list["content"][0]["content"] == [text("write it")]
    ids = [task_list["attrs"]["localId"], *(n["attrs"]["localId"] for n in task_list["content"])]
    assert len(set(ids)) == len(ids)
    assert all(ids)


def test_an_escaped_box_is_text_not_a_task() -> None:
    result = adf.from_markdown("- \\[ \\] not a task\n- \\[x\\] nor this")
    assert result["content"][0]["type"] == "bulletList"
    assert adf.to_markdown(result) == "- \\[ \\] not a task\n- \\[x\\] nor this"


def test_a_list_mixing_boxes_and_plain_items_stays_a_bullet_list() -> None:
    result = adf.from_markdown("- [ ] box\n- plain\n")
    assert result["content"][0]["type"] == "bulletList"
    assert adf.to_markdown(result) == "- \\[ \\] box\n- plain"


def test_quotes_rules_and_tables() -> None:
    result = adf.from_markdown("> said\n\n---\n\n| a | b |\n| --- | --- |\n| 1 | x \\| y |\n")
    quote, rule, table = result["content"]
    assert quote == {"type": "blockquote", "content": [para(text("said"))]}
    assert rule == {"type": "rule"}
    header, row = table["content"]
    assert [cell["type"] for cell in header["content"]] == ["tableHeader", "tableHeader"]
    assert row["content"][1] == {"type": "tableCell", "content": [para(text("x | y"))]}


def test_a_block_a_container_does_not_admit_becomes_one_it_does() -> None:
    """A list item admits paragraphs, code and lists; a quote no heading, table or quote."""
    result = adf.from_markdown("- # title\n\n> # h\n> > inner\n")
    listed, quote = result["content"]
    assert listed["content"][0] == item(para(text("title")))
    assert quote == {"type": "blockquote", "content": [para(text("h")), para(text("inner"))]}


def test_an_image_becomes_a_link_and_refused_links_stay_text() -> None:
    result = adf.from_markdown("![chart](https://e.x/c.png) [x](javascript:alert(1))")
    nodes = result["content"][0]["content"]
    assert nodes[0] == text("chart", href="https://e.x/c.png")
    assert nodes[1] == text(" [x](javascript:alert(1))")


def test_raw_html_is_text_never_markup() -> None:
    result = adf.from_markdown("<script>alert(1)</script>\n\nsee <b>this</b>")
    assert result == doc(para(text("<script>alert(1)</script>")), para(text("see <b>this</b>")))


# ------------------------------------------------------------------------------ ADF -> Markdown


def test_a_jira_description_reads_as_markdown() -> None:
    description = doc(
        {"type": "heading", "attrs": {"level": 2}, "content": [text("Goal")]},
        para(
            text("Make "),
            text("it", "strong"),
            text(" "),
            text("fast", "em", "strike"),
            {"type": "hardBreak"},
            text("see "),
            text("docs", href="https://e.x/d"),
            text(" and "),
            text("run()", "code"),
        ),
        {
            "type": "bulletList",
            "content": [
                item(para(text("one")), {"type": "orderedList", "content": [item(para(text("a")))]})
            ],
        },
        {"type": "codeBlock", "attrs": {"language": "sh"}, "content": [text("make test")]},
        {"type": "blockquote", "content": [para(text("quoted"))]},
        {"type": "rule"},
    )
    assert adf.to_markdown(description) == (
        "## Goal\n\n"
        "Make **it** *~~fast~~*\nsee [docs](https://e.x/d) and `run()`\n\n"
        "- one\n  1. a\n\n"
        "```sh\nmake test\n```\n\n"
        "> quoted\n\n"
        "---"
    )


def test_marks_spanning_several_text_nodes_open_and_close_once() -> None:
    nodes = [text("bold ", "strong"), text("both", "strong", "em"), text(" plain")]
    assert adf.to_markdown(doc(para(*nodes))) == "**bold *both*** plain"


def test_nothing_is_no_text() -> None:
    assert adf.to_markdown(None) == ""
    assert adf.to_markdown({}) == ""
    assert adf.to_markdown(doc()) == ""


def test_a_table_reads_as_a_gfm_table_its_pipes_escaped() -> None:
    def cell(kind: str, value: str) -> dict[str, Any]:
        return {"type": kind, "attrs": {}, "content": [para(text(value))]}

    table = {
        "type": "table",
        "content": [
            {"type": "tableRow", "content": [cell("tableHeader", "k"), cell("tableHeader", "v")]},
            {"type": "tableRow", "content": [cell("tableCell", "a|b")]},
        ],
    }
    assert adf.to_markdown(doc(table)) == "| k | v |\n| --- | --- |\n| a\\|b | |"


def test_task_and_decision_lists_read_as_checklists_and_bullets() -> None:
    tasks = {
        "type": "taskList",
        "attrs": {"localId": "l"},
        "content": [
            {
                "type": "taskItem",
                "attrs": {"localId": "1", "state": "DONE"},
                "content": [text("a")],
            },
            {
                "type": "taskList",
                "attrs": {"localId": "m"},
                "content": [
                    {"type": "taskItem", "attrs": {"localId": "2", "state": "TODO"}, "content": []}
                ],
            },
        ],
    }
    decisions = {
        "type": "decisionList",
        "attrs": {"localId": "d"},
        "content": [
            {
                "type": "decisionItem",
                "attrs": {"localId": "3", "state": "DECIDED"},
                "content": [text("ship")],
            }
        ],
    }
    assert adf.to_markdown(doc(tasks, decisions)) == "- [x] a\n  - [ ]\n\n* ship"


def test_inline_nodes_markdown_has_no_syntax_for_read_as_text() -> None:
    nodes = [
        {"type": "mention", "attrs": {"id": "5b10a", "text": "@Ann Lee"}},
        text(" "),
        {"type": "mention", "attrs": {"id": "5b10b"}},
        text(" "),
        {"type": "emoji", "attrs": {"shortName": ":smile:", "text": "😄"}},
        {"type": "emoji", "attrs": {"shortName": ":party:"}},
        text(" "),
        {"type": "inlineCard", "attrs": {"url": "https://e.x/PROJ-1"}},
        text(" "),
        {"type": "status", "attrs": {"text": "IN PROGRESS", "color": "blue"}},
        text(" "),
        {"type": "date", "attrs": {"timestamp": "1582152559000"}},
    ]
    assert adf.to_markdown(doc(para(*nodes))) == (
        "@Ann Lee @5b10b 😄:party: <https://e.x/PROJ-1> `IN PROGRESS` 2020-02-19"
    )


def test_panels_expands_media_and_cards_read_gracefully() -> None:
    panel = {"type": "panel", "attrs": {"panelType": "warning"}, "content": [para(text("careful"))]}
    expand = {"type": "expand", "attrs": {"title": "Logs"}, "content": [para(text("long"))]}
    media = {
        "type": "mediaSingle",
        "attrs": {"layout": "center"},
        "content": [
            {
                "type": "media",
                "attrs": {"type": "file", "id": "a1", "collection": "c", "alt": "shot.png"},
            }
        ],
    }
    external = {
        "type": "mediaGroup",
        "content": [{"type": "media", "attrs": {"type": "external", "url": "https://e.x/i.png"}}],
    }
    card = {"type": "blockCard", "attrs": {"url": "https://e.x/page"}}
    assert adf.to_markdown(doc(panel, expand, media, external, card)) == (
        "> **Warning:**\n>\n> careful\n\n**Logs**\n\nlong\n\n(attachment: shot.png)\n\n"
        "![](https://e.x/i.png)\n\n<https://e.x/page>"
    )


def test_unknown_and_malformed_nodes_keep_their_text_and_never_fail() -> None:
    strange = doc(
        {
            "type": "layoutSection",
            "content": [
                {"type": "layoutColumn", "attrs": {"width": 50}, "content": [para(text("left"))]},
                {"type": "layoutColumn", "attrs": {"width": 50}, "content": [para(text("right"))]},
            ],
        },
        {"type": "futureBlock", "content": [text("inline kept")]},
        {"type": "futureLeaf", "attrs": {"text": "attr kept"}},
        {"type": "paragraph", "content": "not a list"},
        {"type": "paragraph", "content": [None, 3, {"type": "text"}, text("ok")]},
        {"type": "heading", "attrs": "nope", "content": [text("h")]},
        {"type": "codeBlock", "attrs": {"language": "x`y\ninjected"}, "content": [text("c")]},
        {"type": "orderedList", "attrs": {"order": "7"}, "content": [item(para(text("n")))]},
        "a string",
    )
    assert adf.to_markdown(strange) == (
        "left\n\nright\n\ninline kept\n\nattr kept\n\nok\n\n# h\n\n```xyinjected\nc\n```\n\n1. n"
    )


def test_text_that_looks_like_markdown_reads_back_as_the_same_text() -> None:
    literal = [
        "# not a heading",
        "- not a list",
        "1. not a list",
        "> not a quote",
        "*not em* _nor this_ `nor code` [nor](link) <b>nor html</b> &amp;",
        "snake_case_name and 2 * 3 stay readable",
    ]
    for line in literal:
        written = adf.to_markdown(doc(para(text(line))))
        assert adf.from_markdown(written) == doc(para(text(line))), written
    assert adf.to_markdown(doc(para(text("snake_case_name and 2 * 3")))) == (
        "snake_case_name and 2 * 3"
    )


# ------------------------------------------------------------------------------ round trips


PLANNER_BODY = """## Context

The exporter writes `out.csv` by hand; use the [csv module](https://docs.python.org/3/library/csv.html).

## Steps

1. Replace the writer in `export.py`.
2. Add tests:
   - quoting of commas
   - **empty** rows
3. Run *all* the tests.

```python
writer = csv.writer(handle)
```

> Keep the column order.

| Column | Type |
| --- | --- |
| id | int |

- [ ] done when the tests pass"""


def test_a_planner_body_with_cpes_generated_section_comes_back_byte_for_byte() -> None:
    body = markers.issue_body(PLANNER_BODY, ["PROJ-3", "PROJ-4"], "plan:3:a").rstrip("\n")
    written = adf.from_markdown(body)
    read = adf.to_markdown(written)
    assert read == body
    assert markers.user_body(read) == PLANNER_BODY
    assert markers.has_key(read, "plan:3:a")


def test_hidden_markers_are_plain_text_paragraphs_in_adf() -> None:
    body = markers.issue_body("Body.", [], "k:1")
    assert adf.from_markdown(body) == doc(
        para(text("Body.")),
        para(text("<!-- cpe:generated -->"), {"type": "hardBreak"}, text("<!-- cpe:key=k:1 -->")),
    )
    assert adf.from_markdown("a <!-- cpe:key=k:2 --> b")["content"][0]["content"] == [
        text("a <!-- cpe:key=k:2 --> b")
    ]
    assert markers.has_key(adf.to_markdown(adf.from_markdown("a <!-- cpe:key=k:2 --> b")), "k:2")


@pytest.mark.parametrize(
    "markdown",
    [
        "plain",
        "# H1\n\n###### H6",
        "**strong** *em* ~~strike~~ `code` [link](https://e.x/a_b)",
        "line one\nline two",
        "- a\n- b\n  - c\n    1. d",
        "1. a\n2. b",
        "5. five\n6. six",
        "- [ ] t\n- [x] u",
        "```\nno language\n```",
        "````md\n```\ninner fence\n```\n````",
        "> quote\n>\n> second",
        "---",
        "| a | b |\n| --- | --- |\n| 1 | 2 |",
        "- a\n\n* b",
        "1. a\n\n1) b",
        "x ``a`b`` y `` `x ``",
        "<https://e.x/q?a=1>",
        "[text](<https://e.x/(a)>)",
    ],
)
def test_markdown_in_normal_form_round_trips_exactly(markdown: str) -> None:
    assert adf.to_markdown(adf.from_markdown(markdown)) == markdown


# Inputs generated Markdown found where the Markdown written back read differently.
ODD_MARKDOWN = [
    "- \n+",  # two lists in a row: the second's markers differ
    "- - +",  # a sublist as an item's first block, down to an empty item
    "- -     a",  # a code block as a sublist item's first block
    "- a\n\n  - ",  # an empty item right after an item's text
    "<!-- c -->_",  # a line that starts with a comment and goes on
    "<!-- c -->_<!-- c -->",
    "_*_",  # an emphasised delimiter
    "*a\t```a```**",  # a tab inside emphasis
    "!*[a](b)*",  # '!' before a link
    "a  #\n---\n",  # a setext heading ending in '#'
    "#\t#\t#",
    "- #\n\ta",  # an empty heading in an item
    "*a\na*\n---\n",  # a line break inside a heading
    "***a**.**",  # marks opened together, closed apart
    "**.***.**",
    ">| a |\n| - |\n",  # a delimiter row inside a paragraph
    "\\-- -",  # a thematic break written as text
    "<?| a |\n| - |\n\n\na",  # an HTML block to the end, blank lines and all
    "- [ ] a\n\n    a",  # a box, then a second paragraph: no task
    "- \\[ \\] a",  # an escaped box: no task
    "- [ ] a\n  - ",  # a box, then a sublist that is no checklist
    "h1. *` a`",  # code that starts with a space
    "x `  ` y",  # code of spaces only
    "[~u]*# a* ",  # emphasis Markdown cannot say after a word, before a '#'
    "a**#b**",
    "<!-- c -->a~\t",  # a tilde before a tab, then nothing
    "a| a |\n| - |\n\\-:",  # a line that would be a one-column table's delimiter row
    "- [ ] !\n!",  # a '!' ending a line inside a list item
    "- [ ]  ~a",  # a '~' after spaces that the line start drops
    "**#  - a**",  # strong text that would start a wiki list line ("*# ")
    "<!-- c -->\t* ",  # a star after a tab, then nothing
    "a  *\na\n---\n",  # a star before a line break in a heading
]


@pytest.mark.parametrize("markdown", ODD_MARKDOWN)
def test_odd_markdown_is_written_back_in_a_form_that_reads_the_same(markdown: str) -> None:
    written = adf.to_markdown(adf.from_markdown(markdown))
    assert adf.to_markdown(adf.from_markdown(written)) == written


def _nested(kind: str, depth: int, inner: dict[str, Any]) -> dict[str, Any]:
    node = inner
    for _ in range(depth):
        node = {"type": kind, "content": [node]}
    return node


@pytest.mark.parametrize("kind", ["blockquote", "bulletList", "listItem", "futureBlock"])
def test_a_document_nested_ten_thousand_deep_reads_without_exhausting_the_stack(kind: str) -> None:
    deep = _nested(kind, 10_000, para(text("bottom")))
    assert "bottom" in adf.to_markdown(doc(deep))


def test_inline_nodes_nested_ten_thousand_deep_read_as_their_text() -> None:
    deep = _nested("futureInline", 10_000, text("bottom"))
    assert adf.to_markdown(doc(para(text("top "), deep))) == "top bottom"


@pytest.mark.parametrize(
    "markdown",
    [
        ">" * 32_767,
        "- " * 16_000 + "x",
        "[" * 32_767,
        "*a " * 10_922,
        "<a " * 10_922,
        "`a " * 10_922,
        "*_" * 8_000 + "x" + "_*" * 8_000,
        "| a |\n| - |\n" + "| x |\n" * 5_000,
        "<!--" * 8_191,  # comments that never close
        "x <!--" * 5_461,
    ],
)
def test_markdown_as_long_as_a_jira_field_holds_converts_both_ways(markdown: str) -> None:
    """Jira keeps at most 32,767 characters in a text field; nesting past MAX_DEPTH is cut."""
    written = adf.from_markdown(markdown)
    read = adf.to_markdown(written)
    assert adf.to_markdown(adf.from_markdown(read)) == read
    assert wiki.to_markdown(wiki.from_markdown(read)) == read


_TYPES = st.sampled_from(
    [
        *("doc", "paragraph", "text", "heading", "bulletList", "orderedList", "listItem"),
        *("taskList", "taskItem", "codeBlock", "blockquote", "panel", "table", "tableRow"),
        *("tableCell", "hardBreak", "mention", "emoji", "inlineCard", "status", "date", "media"),
        *("mediaSingle", "expand", "rule", "futureNode"),
    ]
)
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**15), st.text(max_size=12), _TYPES
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["type", "content", "text", "attrs", "marks", "level", "href"]),
            inner,
            max_size=5,
        ),
        st.fixed_dictionaries(
            {"type": _TYPES, "content": st.lists(inner, max_size=4)},
            optional={"attrs": inner, "marks": inner, "text": inner},
        ),
    ),
    max_leaves=40,
)


@settings(
    max_examples=300, suppress_health_check=list(HealthCheck), deadline=None, derandomize=True
)
@given(st.fixed_dictionaries({"type": st.just("doc"), "content": st.lists(_JSON, max_size=4)}))
def test_any_json_a_tracker_returns_reads_as_some_text_and_never_fails(document: Any) -> None:
    """Whatever shape a description comes in (a node of a newer schema, a field of the wrong
    type), reading it gives a string, and that Markdown written back reads the same again."""
    read = adf.to_markdown(document)
    assert isinstance(read, str)
    again = adf.to_markdown(adf.from_markdown(read))
    assert adf.to_markdown(adf.from_markdown(again)) == again


def test_a_document_as_jiras_editor_stores_it_reads_past_the_editors_attributes() -> None:
    """The editor adds ids, alignment and breakout marks, column widths and media sizes: none
    of them is text, all are passed over."""
    stored = {
        "type": "doc",
        "version": 1,
        "content": [
            {
                "type": "paragraph",
                "attrs": {"localId": "6f1c"},
                "marks": [{"type": "alignment", "attrs": {"align": "center"}}],
                "content": [
                    {
                        "type": "text",
                        "text": "Centred ",
                        "marks": [{"type": "textColor", "attrs": {"color": "#ff5630"}}],
                    },
                    {
                        "type": "text",
                        "text": "under",
                        "marks": [{"type": "underline"}, {"type": "strong"}],
                    },
                    {
                        "type": "text",
                        "text": "2",
                        "marks": [{"type": "subsup", "attrs": {"type": "sup"}}],
                    },
                ],
            },
            {
                "type": "codeBlock",
                "attrs": {"language": "python"},
                "marks": [{"type": "breakout", "attrs": {"mode": "wide"}}],
                "content": [{"type": "text", "text": "x = 1"}],
            },
            {
                "type": "table",
                "attrs": {"isNumberColumnEnabled": False, "layout": "default", "localId": "t1"},
                "content": [
                    {
                        "type": "tableRow",
                        "content": [
                            {
                                "type": "tableHeader",
                                "attrs": {"colspan": 1, "rowspan": 1, "colwidth": [120]},
                                "content": [
                                    {
                                        "type": "paragraph",
                                        "content": [{"type": "text", "text": "h"}],
                                    }
                                ],
                            }
                        ],
                    }
                ],
            },
        ],
    }
    assert (
        adf.to_markdown(stored) == "Centred **under**2\n\n```python\nx = 1\n```\n\n| h |\n| --- |"
    )
