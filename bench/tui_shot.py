"""``docs/tui-board.svg``: the console's board (``cpe tui``) after ``cpe demo``, as a person
sees it on a 100x30 terminal. ``make tui-shot`` remakes it:

    .venv/bin/python bench/tui_shot.py [OUT.svg] [--size COLSxROWS] [--text]

It runs ``cpe demo`` in a temporary directory (offline: the scripted model), opens the console
on the finished demo's journal (read-only, as ``cpe tui`` does once the engine has stopped),
waits until the board shows both work items, and saves Textual's SVG screenshot; ``--text``
prints the screen as text too.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.cli.repository import resolve_config  # noqa: E402
from adapters.cli.services import dashboard_settings  # noqa: E402
from adapters.tui.app import Console  # noqa: E402
from adapters.tui.connect import open_feed  # noqa: E402

CPE = Path(sys.executable).parent / "cpe"
WAIT = 60.0  # seconds for the board to show the demo's items


async def shoot(app: Console, size: tuple[int, int], items: int) -> tuple[str, str]:
    async with app.run_test(size=size) as pilot:
        end = time.monotonic() + WAIT
        while app.view is None or len(app.view["work_items"]) < items:
            if time.monotonic() > end:
                raise SystemExit("the board did not show the demo's items in time")
            await pilot.pause(0.05)
        await pilot.pause()
        svg = app.export_screenshot(title="cpe tui")
        text = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
        await pilot.press("q")
    return svg, text


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "docs" / "tui-board.svg")
    parser.add_argument("--size", default="100x30", help="the terminal, COLSxROWS")
    parser.add_argument("--text", action="store_true", help="print the screen as text too")
    args = parser.parse_args(argv)
    cols, rows = (int(n) for n in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="cpe-tui-shot-") as tmp:
        done = subprocess.run(
            [str(CPE), "demo", "--dir", tmp], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            return done.returncode
        config, root = resolve_config(None, Path(tmp) / "sample")
        feed = open_feed(root / config.engine.state_dir, dashboard_settings(config), title="sample")
        svg, text = asyncio.run(shoot(Console(feed), (cols, rows), 2))
    args.out.write_text(svg)
    if args.text:
        print(text)
    print(f"wrote {args.out} ({len(svg):,} bytes, {cols}x{rows})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
