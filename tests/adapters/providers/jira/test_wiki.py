"""Jira wiki markup <-> Markdown: what Data Center's v2 descriptions and comments read as, and what
cpe's Markdown is written as (adapters/providers/jira/wiki.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.providers import markers
from adapters.providers.jira import adf, wiki
from tests.adapters.providers.jira.test_adf import ODD_MARKDOWN, PLANNER_BODY

# ------------------------------------------------------------------------------ wiki -> Markdown


def test_nothing_is_no_text() -> None:
    assert wiki.to_markdown(None) == ""
    assert wiki.to_markdown("") == ""
    assert wiki.to_markdown("\n\n") == ""


@pytest.mark.parametrize("level", [1, 2, 3, 4, 5, 6])
def test_headings(level: int) -> None:
    assert wiki.to_markdown(f"h{level}. Title *here*") == "#" * level + " Title **here**"


def test_text_effects_read_as_markdown_marks() -> None:
    markup = "*strong* _em_ -gone- {{mono}} +under+ ^sup^ ~sub~ ??cite?? mid{*}word{*}s"
    assert (
        wiki.to_markdown(markup)
        == "**strong** *em* ~~gone~~ `mono` under sup sub *cite* mid**word**s"
    )


def test_what_only_looks_like_an_effect_stays_text() -> None:
    markup = "a - b, well-known, snake_case_name, 2 * 3, x-ray-"
    assert wiki.to_markdown(markup) == "a - b, well-known, snake_case_name, 2 * 3, x-ray-"


def test_links_mentions_attachments_and_images() -> None:
    markup = (
        "[the docs|https://e.x/d] [https://e.x/bare] [~jsmith] [~accountid:5b10a] [^log.txt] "
        "!https://e.x/i.png! !shot.png|thumbnail!"
    )
    assert wiki.to_markdown(markup) == (
        "[the docs](https://e.x/d) <https://e.x/bare> @jsmith @5b10a log.txt "
        "[(image: i.png)](https://e.x/i.png) (image: shot.png)"
    )


def test_a_script_link_is_no_link() -> None:
    assert wiki.to_markdown("[click|javascript:alert(1)]") == "click"
    assert wiki.to_markdown("[javascript:alert(1)]") == "javascript:alert(1)"


def test_line_breaks_escapes_entities_and_colours() -> None:
    markup = "one\ntwo\\\\three \\*not strong\\* &#92; &amp; {color:red}red{color}"
    assert wiki.to_markdown(markup) == "one\ntwo\nthree \\*not strong\\* \\\\ & red"


def test_code_and_noformat_blocks_keep_their_text_and_language() -> None:
    markup = (
        "{code:java}\nint x = *1*;\n{code}\n\n{code:title=Q.sql|language=sql}select 1{code}\n\n"
        "{noformat}\n  raw _text_\n{noformat}\n\n{code}\nno language\n{code}"
    )
    assert wiki.to_markdown(markup) == (
        "```java\nint x = *1*;\n```\n\n```sql\nselect 1\n```\n\n```\n  raw _text_\n```\n\n"
        "```\nno language\n```"
    )


def test_an_unclosed_block_runs_to_the_end() -> None:
    assert wiki.to_markdown("{code}\nx = 1\n\ny") == "```\nx = 1\n\ny\n```"


def test_quotes_panels_and_rules() -> None:
    markup = (
        "bq. short quote\n\n{quote}\nlong *quote*\n\n* in it\n{quote}\n\n----\n\n"
        "{warning:title=Careful}\nhot\n{warning}\n\n{panel:title=Plain}\nboxed\n{panel}"
    )
    assert wiki.to_markdown(markup) == (
        "> short quote\n\n> long **quote**\n>\n> - in it\n\n---\n\n"
        "> **Warning:**\n>\n> **Careful**\n>\n> hot\n\n> **Info:**\n>\n> **Plain**\n>\n> boxed"
    )


def test_lists_nest_by_their_markers() -> None:
    markup = "* a\n** a1\n**# a1i\n* b\n# one\n#* one-b\n# two\n- dash"
    assert wiki.to_markdown(markup) == (
        "- a\n  - a1\n    1. a1i\n- b\n\n1. one\n   - one-b\n2. two\n\n- dash"
    )


def test_tables_with_a_header_row() -> None:
    markup = "||Key||Value||\n|a|[x|https://e.x]|\n|b \\| c|{{d|e}}|"
    assert wiki.to_markdown(markup) == (
        "| Key | Value |\n| --- | --- |\n| a | [x](https://e.x) |\n| b \\| c | `d\\|e` |"
    )


def test_deep_nesting_is_bounded_and_keeps_the_text() -> None:
    quotes = "{quote}\n" * 500 + "deep" + "\n{quote}" * 500
    assert "deep" in wiki.to_markdown(quotes)
    effects = "*_" * 2000 + "x" + "_*" * 2000
    assert "x" in wiki.to_markdown(effects)


# ------------------------------------------------------------------------------ Markdown -> wiki


def test_a_planner_body_is_written_as_wiki_markup() -> None:
    body = markers.issue_body(PLANNER_BODY, ["PROJ-3"], "plan:3:a").rstrip("\n")
    written = wiki.from_markdown(body)
    assert written == (
        "h2. Context\n\n"
        "The exporter writes {{out.csv}} by hand; use the "
        "[csv module|https://docs.python.org/3/library/csv.html].\n\n"
        "h2. Steps\n\n"
        "# Replace the writer in {{export.py}}.\n"
        "# Add tests:\n"
        "#* quoting of commas\n"
        "#* *empty* rows\n"
        "# Run _all_ the tests.\n\n"
        "{code:python}\nwriter = csv.writer(handle)\n{code}\n\n"
        "{quote}\nKeep the column order.\n{quote}\n\n"
        "||Column||Type||\n|id|int|\n\n"
        "* [ ] done when the tests pass\n\n"
        "<!-- cpe:generated -->\nBlocked by #PROJ-3\n<!-- cpe:key=plan:3:a -->"
    )
    assert markers.has_key(written, "plan:3:a")  # the raw description carries the key
    read = wiki.to_markdown(written)
    assert read == body
    assert markers.user_body(read) == PLANNER_BODY


def test_text_that_looks_like_markup_is_escaped_and_reads_back_the_same() -> None:
    literal = [
        "h1. not a heading",
        "* not a list",
        "# not a list",
        "- not a list",
        "----",
        "|not|a|table|",
        "*not strong* _nor em_ -nor gone- {{nor mono}} [nor|link] !nor image! ??nor cite??",
        "a back\\slash, &amp; an entity, {braces}",
        "{code}not code{code}",
    ]
    for line in literal:
        markdown = adf.to_markdown(
            {
                "type": "doc",
                "content": [{"type": "paragraph", "content": [{"type": "text", "text": line}]}],
            }
        )
        written = wiki.from_markdown(markdown)
        assert wiki.to_markdown(written) == markdown, written


def test_marks_inside_words_use_braces() -> None:
    assert wiki.from_markdown("mid**word**s and `x`y") == "mid{*}word{*}s and {{x}}y"


def test_code_blocks_and_sublists_in_list_items_follow_the_items_line() -> None:
    markdown = "1. Run:\n\n   ```sh\n   make test\n   ```\n\n   - then this\n2. Done"
    written = wiki.from_markdown(markdown)
    assert written == "# Run:\n{code:sh}\nmake test\n{code}\n#* then this\n# Done"
    assert wiki.to_markdown(written) == adf.to_markdown(adf.from_markdown(markdown))


@pytest.mark.parametrize(
    "markdown",
    [
        "plain",
        "# H1\n\n###### H6",
        "**strong** *em* ~~strike~~ `code` [link](https://e.x/a_b)",
        "line one\nline two",
        "- a\n- b\n  - c\n    1. d",
        "1. a\n2. b",
        "- [ ] t\n- [x] u",
        "```\nno language\n```",
        "> quote\n>\n> second",
        "---",
        "| a | b |\n| --- | --- |\n| 1 | 2 |",
        "<https://e.x/q?a=1>",
        "a \\\\ b & c * d \\*e\\*",
        "-\n- second item; the first is empty",
    ],
)
def test_markdown_in_normal_form_round_trips_through_wiki_markup(markdown: str) -> None:
    assert wiki.to_markdown(wiki.from_markdown(markdown)) == markdown


_PIECES = st.sampled_from(
    [
        *"ab .#*_`[]()<>!~\\-+>|&\n:{}?^",
        *("\n\n", "- ", "1. ", "```", "<!-- c -->", "http://x.y", "**", "  ", "> ", "\n---\n"),
        *(
            "| a |\n| - |\n",
            "[a](http://b)",
            "- [ ] ",
            "{noformat}",
            "{quote}",
            "h1. ",
            "bq. ",
            "??",
        ),
    ]
)


@settings(
    max_examples=300, suppress_health_check=list(HealthCheck), deadline=None, derandomize=True
)
@given(st.lists(_PIECES, max_size=25).map("".join))
def test_markdown_comes_back_from_wiki_markup_as_it_comes_back_from_adf(source: str) -> None:
    """Whatever Markdown cpe writes, Data Center gives it back as Cloud does (lists start at 1:
    wiki markup has no start number, so none is generated)."""
    markdown = adf.to_markdown(adf.from_markdown(source))
    assert wiki.to_markdown(wiki.from_markdown(markdown)) == markdown


@pytest.mark.parametrize("source", ODD_MARKDOWN)
def test_odd_markdown_comes_back_from_wiki_markup_as_from_adf(source: str) -> None:
    markdown = adf.to_markdown(adf.from_markdown(source))
    assert wiki.to_markdown(wiki.from_markdown(markdown)) == markdown


def test_code_that_holds_a_code_tag_is_written_as_noformat_its_language_lost() -> None:
    """Nothing escapes ``{code}`` inside a code block: such code goes in ``{noformat}``."""
    written = wiki.from_markdown("```java\nsee {code} here\n```")
    assert written == "{noformat}\nsee {code} here\n{noformat}"
    assert wiki.to_markdown(written) == "```\nsee {code} here\n```"


@pytest.mark.parametrize(
    "markup",
    [
        "*a " * 33_000,  # effects that never close
        "{{" * 50_000,
        "[" * 100_000,
        "!a " * 33_000,
        "??a " * 25_000,
        "{*}a " * 20_000,
        "<!--" * 25_000,
        "-a- " * 25_000,
        "|" * 100_000,
        "*" * 5_000 + " deep\n",  # a list level 5,000 deep
        "{quote}\nx\n" * 10_000,
    ],
)
def test_long_runs_of_openers_are_read_in_one_pass(markup: str) -> None:
    """Every closing tag is searched for once: a line of 100,000 characters that open and never
    close reads in one pass (a search per opener would outlast the suite's timeout)."""
    read = wiki.to_markdown(markup)
    assert read.replace("\\", "").replace("\n", "").strip()


def test_markup_as_data_center_users_write_it() -> None:
    markup = (
        "h3.Not a heading without its space\r\n"
        "{code:title=Bar.java|borderStyle=solid}\r\nclass Bar {}\r\n{code}\r\n\r\n"
        "||Name|Ann|\r\n||Role|[lead|https://e.x/r|tooltip]|\r\n\r\n"
        "* one\r\n*# one.a\r\n*#* one.a.x\r\n\r\n"
        "Smile :) and {status:colour=Green|title=Done} stay text. {anchor:top}"
    )
    assert wiki.to_markdown(markup) == (
        "h3.Not a heading without its space\n\n"
        "```\nclass Bar {}\n```\n\n"
        "| Name | Ann |\n| --- | --- |\n| Role | [lead](https://e.x/r) |\n\n"
        "- one\n  1. one.a\n     - one.a.x\n\n"
        "Smile :) and {status:colour=Green|title=Done} stay text. {anchor:top}"
    )


def test_plain_prose_is_written_without_needless_escapes() -> None:
    prose = "Done! Use snake_case, 2 * 3, well-known e.g. - this; what? why?"
    assert wiki.from_markdown(prose) == prose
    assert wiki.to_markdown(prose) == prose


_MARKUP = st.sampled_from(
    [
        *"ab *_-+^~?!|[]{}\\#\n&;",
        *("h1. ", "bq. ", "* ", "** ", "# ", "*# ", "- ", "||", "----", "\\\\", "{{", "}}"),
        *("{code}", "{code:java}", "{noformat}", "{quote}", "{info}", "{panel:title=t}"),
        *("{color:red}", "{color}", "[a|http://b]", "[~u]", "!i.png!", "&#92;", "<!-- c -->"),
    ]
)


@settings(
    max_examples=300, suppress_health_check=list(HealthCheck), deadline=None, derandomize=True
)
@given(st.lists(_MARKUP, max_size=30).map("".join))
def test_any_markup_reads_as_markdown_that_reads_the_same_again(markup: str) -> None:
    """What a Data Center user typed, however odd, reads as Markdown, and that Markdown is in
    the normal form (written as ADF and read back it does not change)."""
    read = wiki.to_markdown(markup)
    assert adf.to_markdown(adf.from_markdown(read)) == read


@pytest.mark.parametrize(
    "markup",
    [
        "-~-",
        "[[~u]",
        "[~u]*# a* ",
        "{info}h1. a",
        "* [ ] a\\\\\\\\a",
        "|a\\\\*  a",
        "[~u]-_a- ",
        "\\\\~a",
        "-*# * {color:red}* ",
        "!&#92;http://x.y!",
        "\\  ~a",
        "[~u]*~*-",
        "[~u]-[a|http://b]a- ",
    ],
)
def test_odd_markup_reads_as_markdown_in_its_normal_form(markup: str) -> None:
    """Markup generated at random found these: what they read as changed when written as ADF
    and read again."""
    read = wiki.to_markdown(markup)
    assert adf.to_markdown(adf.from_markdown(read)) == read
