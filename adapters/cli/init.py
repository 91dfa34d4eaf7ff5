"""``cpe init``: a repository prepared for the engine (``supervisor.toml``, ``.claude/`` agent
definitions, ``.gitignore`` entries), and what to do next. ``--tracker`` and ``--forge`` write
the ``supervisor.toml`` of that pair (init_provider.py)."""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path

from adapters.cli.common import fail
from adapters.cli.init_provider import (
    ProviderText,
    default_forge,
    origin_of,
    pair_problem,
    provider_text,
    with_provider,
)
from adapters.cli.provider_settings import NAMES, TRACKERS_ONLY, ProviderKind
from adapters.cli.repository import CONFIG_NAME, git_toplevel
from adapters.cli.settings import CpeConfig, load_config, parse_config
from adapters.defaults import CLAUDE_DIR, SUPERVISOR_TOML
from domain.errors import ConfigError

WORKTREES_IGNORED = ".worktrees/"


def init(repo: Path, tracker: ProviderKind | None = None, forge: ProviderKind | None = None) -> int:
    """Without ``tracker`` and ``forge`` the shipped defaults (everything local); with either,
    a ``supervisor.toml`` for that pair (the tracker local and the forge the tracker's own
    when not given, the local one for Linear and Jira), refused in one line before anything is
    written when it is no valid pair."""
    pair = None
    if tracker is not None or forge is not None:
        pair = (tracker or "local", forge or default_forge(tracker or "local"))
        if (problem := pair_problem(*pair)) is not None:
            return fail(f"init: {problem}", 2)
    try:
        root = git_toplevel(repo.resolve(), "--repo PATH")
        existing = root / CONFIG_NAME  # its [engine] state_dir is the one to ignore
        config = load_config(existing) if existing.exists() else parse_config({})
    except ConfigError as exc:
        return fail(f"configuration error: {exc}")
    provider = None if pair is None or existing.exists() else provider_text(*pair, origin_of(root))
    ignored = [WORKTREES_IGNORED, _ignore_entry(root, config.engine.state_dir)]
    written: list[str] = []
    for source, target in _defaults(root):
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if target == existing and provider is not None:
            text = with_provider(source.read_text(encoding="utf-8"), provider.text)
            parse_config(tomllib.loads(text))  # what is written loads, for this pair
            target.write_text(text, encoding="utf-8")
        else:
            shutil.copyfile(source, target)
        written.append(str(target.relative_to(root)))
    if _ignore(root / ".gitignore", ignored):
        written.append(".gitignore")
    for path in written:
        print(f"wrote {path}")
    if not written:
        print("nothing to do: the repository is already set up")
    if pair is not None and provider is None:
        print(
            f"cpe: warning: {CONFIG_NAME} exists and is kept as it is, not written for "
            f"--tracker {pair[0]} --forge {pair[1]} ({config.provider.describe()}); edit its "
            "[provider] by hand (docs/configuration.md)",
            file=sys.stderr,
        )
    if provider is not None:
        _print_left(provider)
        config = load_config(existing)  # what was written: the next steps and warnings are its
    tops = dict.fromkeys(Path(path).parts[0] for path in written)  # .claude/…: .claude
    paths = " ".join(tops) or "supervisor.toml .claude .gitignore"
    forge = config.provider.revisions_kind
    share = _SHARE_LOCAL if forge == "local" else _SHARE_REMOTE
    print(
        _NEXT_STEPS.format(
            read=_READ_LOCAL if forge == "local" else _READ_REMOTE,
            share=share.format(paths=paths, forge=NAMES[forge]),
            work=_work_step(config),
        )
    )
    b = config.budget
    print(
        f"\nbudgets ([budget] in supervisor.toml; 0 is none): ${b.per_run_usd:g} a run, "
        f"${b.per_item_usd:g} a work item, ${b.per_spec_usd:g} planning a spec version, "
        f"${b.per_day_usd:g} a day"
    )
    if (warning := own_python(config)) is not None:
        print(f"cpe: warning: {warning}", file=sys.stderr)
    return 0


def _ignore(gitignore: Path, ignored: list[str]) -> bool:
    """Add the entries of ``ignored`` that ``.gitignore`` lacks; whether any was added."""
    lines = gitignore.read_text().splitlines() if gitignore.exists() else []
    present = {line.strip().strip("/") for line in lines}
    missing = [entry for entry in ignored if entry.strip("/") not in present]
    if not missing:
        return False
    with gitignore.open("a") as out:
        if lines and lines[-1].strip():
            out.write("\n")
        out.write("# cpe: agent worktrees and the engine's state\n")
        out.write("".join(f"{entry}\n" for entry in missing))
    return True


def _print_left(provider: ProviderText) -> None:
    """What was guessed from origin, and what a person still sets, for the pair written."""
    for line in provider.guessed:
        print(f"guessed from origin: {line} (check it)")
    if provider.left:
        print(f"\nleft to set for {provider.pair}:")
        for line in provider.left:
            print(f"  {line}")


def own_python(config: CpeConfig) -> str | None:
    """Why the local pipeline's command would fail on its PATH or run cpe's own Python, or None."""
    local = config.provider.local
    if config.provider.revisions_kind != "local" or not local.pipeline_command:
        return None
    from adapters.providers.local.pipeline import (  # noqa: PLC0415
        missing_program_warning,
        own_python_warning,
    )

    command = local.pipeline_command
    return missing_program_warning(command) or own_python_warning(command)


_NEXT_STEPS = """
next steps:
  1. read supervisor.toml ({read})
  2. {share}
  3. give the agents a model: export ANTHROPIC_API_KEY=... (or a Claude login: claude login);
     for codex-cli roles, OPENAI_API_KEY or codex login
  4. {work}
  5. cpe run   (Ctrl-C stops it; cpe status shows where things are)"""
_SHARE_LOCAL = 'git add {paths} && git commit -m "cpe"   (agents see the committed default branch)'
_SHARE_REMOTE = """git add {paths} && git commit -m "cpe" && git push
     (agents start from, and specs are read at, the default branch on {forge})"""
_READ_LOCAL = "pipeline_command: your test command; auto_merge; concurrency"
_READ_REMOTE = "auto_merge; concurrency; your CI runs on the pull or merge requests"


def _work_step(config: CpeConfig) -> str:
    section = config.provider
    kind = section.work_items_kind
    specs = "specs under specs/" + (", pushed" if section.revisions_kind != "local" else "")
    if kind == "local":
        return f'cpe work add "a title" --body "what to do"   (or write {specs})'
    where = section.where(kind)
    if kind in TRACKERS_ONLY:
        return f"open an issue on {NAMES[kind]} ({where}) (or write {specs})"
    place = "an issue" + (f" in {where}" if where else "")
    return f"open {place} (or write {specs})"


def _ignore_entry(root: Path, state_dir: str) -> str:
    """The ``.gitignore`` line for the state dir (inside the repository: the config says so)."""
    relative = Path(os.path.normpath(root / state_dir)).relative_to(root)
    return f"{relative.as_posix()}/"


def _defaults(root: Path) -> list[tuple[Path, Path]]:
    pairs = [(SUPERVISOR_TOML, root / CONFIG_NAME)]
    claude = CLAUDE_DIR
    for source in sorted(claude.rglob("*.md")):
        pairs.append((source, root / ".claude" / source.relative_to(claude)))
    missing = [str(s) for s, _ in pairs if not s.exists()]
    if missing:
        raise FileNotFoundError(f"the shipped defaults are missing: {', '.join(missing)}")
    return pairs
