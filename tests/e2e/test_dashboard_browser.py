"""The dashboard as a person uses it: a real headless Chromium (Debian's ``chromium``, driven by
Playwright) on the page that `cpe demo --serve` and a real `cpe run` serve.

The board shows the finished demo's two items done (landed, the merge queue empty) and the
review that asked for changes with its inline comments folded under it, its runs table whole
(wrapped, not clipped) at 1400 px and narrower; under `cpe run` what a live run does (its text,
its tool calls) appears on the board and on the run's own page while the agent works, "no run
is active" is not said, a cancel asks first, an action without the token is refused and
changes nothing, and with the token a cancel blocks the item (the run's page follows it) and a
retry from the page moves it on to done; the item's page tells its story and links its runs;
a pause sent with a reason reads once in the banner; the icon answers.
Screenshots of the board are saved as test artifacts (``$CPE_TEST_ARTIFACTS``, else
``test-artifacts/`` in the checkout).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright

from adapters.scripted_model import Match, ScriptedModelServer, load_scenario
from tests.adapters.cli.test_cli import ROOT
from tests.e2e.running import Reader, add_work_item, make_cpe_repo, start_cpe, wait_for
from tests.e2e.test_cpe_console import TALK_THEN_HANG
from tests.e2e.test_cpe_work import status_of

TOKEN = "browser-test-token-3f9a"
ARTIFACTS = Path(os.environ.get("CPE_TEST_ARTIFACTS") or ROOT / "test-artifacts")
TIMEOUT_MS = 120_000
expect.set_options(timeout=TIMEOUT_MS)  # a loaded machine: every wait is generous


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    yield opened
    context.close()


def screenshot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def test_the_board_shows_the_finished_demo_with_both_items_done(
    page: Page, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    serve = ["--serve", "--listen", "127.0.0.1:0"]
    demo = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", "demo", "--dir", str(tmp_path / "demo"), *serve],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    processes.append(demo)
    assert demo.stdout is not None
    out = Reader(demo.stdout)
    assert out.wait_for("cpe demo: dashboard on http"), out.text
    url = next(line for line in out.lines if "dashboard on" in line).split("dashboard on ")[1]
    assert out.wait_for("the dashboard shows the finished demo", timeout=480), out.text
    assert "cpe demo: OK" in out.text
    page.goto(url)
    done = page.locator('.column[data-status="done"]')
    expect(done.locator("#item-1")).to_contain_text("Greet a person by name")
    expect(done.locator("#item-2")).to_contain_text("Greet several people at once")
    expect(page.locator("#item-2 .deps")).to_contain_text("#1 done")
    expect(page.locator("#item-1 .rev")).to_contain_text("merged")
    expect(page.locator("#merge-queue")).to_contain_text("2 landed")  # both, the queue empty
    expect(page.locator("#merge-queue .none")).to_have_text("empty")
    expect(page.locator("#paused")).to_contain_text("final state")
    comments = page.locator("#item-1 details.comments")  # the review that asked for changes
    expect(comments.locator("summary")).to_have_text("needs-changes: 2 inline comments")
    expect(comments.locator("li").first).to_be_hidden()  # folded until a person opens it
    comments.locator("summary").click()
    expect(comments.locator("li").first).to_contain_text("greetings/greet.py:5")
    expect(comments.locator("li").nth(1)).to_contain_text("tests/test_greet.py")
    assert screenshot(page, "board.png").stat().st_size > 10_000
    for width in (1400, 1000):  # the runs table wraps inside its panel: nothing clipped
        page.set_viewport_size({"width": width, "height": 1000})
        assert page.evaluate(RUNS_OVERFLOW) == [], width
    demo.send_signal(signal.SIGINT)
    assert demo.wait(60) == 0


# Each runs table's overflow of its panel, and each outcome cell that ends past the panel's edge
# (in pixels; [] when the table fits).
RUNS_OVERFLOW = """() => {
  const out = [];
  for (const table of document.querySelectorAll("table.runs")) {
    const panel = table.closest("section");
    const edge = panel.getBoundingClientRect().right;
    if (panel.scrollWidth > panel.clientWidth + 1) out.push(["panel", panel.scrollWidth]);
    for (const cell of table.querySelectorAll("td.outcome")) {
      const right = cell.getBoundingClientRect().right;
      if (right > edge + 1) out.push(["outcome", right - edge, cell.textContent]);
    }
  }
  return out;
}"""


def answer_next_dialog(page: Page, *, accept: bool) -> list[str]:
    """Answer the page's next dialog (a confirm()); the list gets its message."""
    said: list[str] = []

    def answer(dialog: Dialog) -> None:
        said.append(dialog.message)
        if accept:
            dialog.accept()
        else:
            dialog.dismiss()

    page.once("dialog", answer)
    return said


def dashboard_url(log: Path) -> str | None:
    for line in log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if record.get("event") == "dashboard listening":
                return str(record["url"])
    return None


def test_a_person_watches_a_live_run_then_cancels_and_retries_it_from_the_page(
    page: Page, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    repo = make_cpe_repo(tmp_path / "repo", extra='token_env = "CPE_DASHBOARD_TOKEN"\n')
    add_work_item(repo, "Greeting", "Add greet(name).")
    home = tmp_path / "home"
    home.mkdir()
    log = home / "cpe.log"
    with log.open("a") as out, ScriptedModelServer([TALK_THEN_HANG]) as model:
        env = {**model.client_env(), "CPE_DASHBOARD_TOKEN": TOKEN}
        engine = start_cpe(repo, home, out, env)
        processes.append(engine)
        assert wait_for(lambda: dashboard_url(log) is not None), log.read_text()
        url = dashboard_url(log)
        assert url is not None
        assert TOKEN not in log.read_text()  # the token is never logged

        page.goto(url)  # no token in the address: a person who has not got it
        item = page.locator("#item-1")
        expect(item).to_have_attribute("data-status", "in-progress")
        expect(page.locator("#live pre")).to_contain_text("Now writing greet(name).")
        expect(page.locator("#live pre")).to_contain_text("Reading the work item first.")
        expect(page.locator("#live pre")).to_contain_text("tool Write: notes.txt (2 chars)")
        expect(page.locator("#live pre")).to_contain_text("tool Bash: cat notes.txt")
        expect(page.locator("#live-none")).to_be_hidden()  # a run is active
        screenshot(page, "board-live.png")
        icon = page.request.get(url + "favicon.ico")
        assert (icon.status, icon.headers["content-type"]) == (200, "image/svg+xml")

        session = page.locator("#live .run-output").first.get_attribute("data-session")
        run_page = page.context.new_page()  # the run's own page, beside the board
        run_page.goto(f"{url}runs/{session}")
        expect(run_page.locator("#activity")).to_contain_text("tool Bash: cat notes.txt")
        expect(run_page.locator("#activity")).to_contain_text("Now writing greet(name).")
        expect(run_page.locator("#result")).to_contain_text("running")
        screenshot(run_page, "run-live.png")

        asked = answer_next_dialog(page, accept=False)  # a person who thinks twice
        item.locator('button[data-action="cancel"]').click()
        expect(page.locator("#notice")).to_contain_text("cancel #1: not sent")
        assert asked == [
            "Cancel the run on #1 'Greeting'? The item is blocked until someone retries it."
        ]
        answer_next_dialog(page, accept=True)
        item.locator('button[data-action="cancel"]').click()
        expect(page.locator("#notice")).to_contain_text("cancel refused (401): missing token")
        assert status_of(repo) == "in-progress"
        assert model.hanging >= 1  # the run goes on

        page.fill("#token", TOKEN)
        page.dispatch_event("#token", "change")
        answer_next_dialog(page, accept=True)
        page.locator('#item-1 button[data-action="cancel"]').click()
        expect(page.locator("#notice")).to_contain_text("cancelling implementor run")
        expect(page.locator('.column[data-status="blocked"] #item-1')).to_be_visible()
        expect(page.locator("#item-1 .ended-note")).to_contain_text("cancelled by a person")
        expect(run_page.locator("#result")).to_contain_text("cancelled by a person")  # it followed
        run_page.close()

        model.book = (
            load_scenario("implement"),
            load_scenario("approve", match=Match(role="reviewer")),
        )
        page.locator('#item-1 button[data-action="retry"]').click()
        expect(page.locator("#notice")).to_contain_text("blocked → in-progress")
        expect(page.locator('.column[data-status="done"] #item-1')).to_be_visible()
        assert status_of(repo) == "done"

        page.locator("#item-1 a.item-link").click()  # the item's page: cpe work show's story
        expect(page.locator("main.detail")).to_contain_text("status history (oldest first)")
        screenshot(page, "item.png")
        page.locator(f'main.detail a[href="/runs/{session}"]').first.click()
        expect(page.locator("#result")).to_contain_text("cancelled by a person")

        page.goto(url)
        page.fill("#pause-reason", "lunch break")
        page.locator('button[data-action="pause"]').click()
        expect(page.locator("#paused")).to_contain_text("dispatch paused by a person since ")
        expect(page.locator("#paused")).to_contain_text(" UTC: lunch break")
        expect(page.locator("#paused")).not_to_contain_text("by a person: by a person")
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(120) == 0
