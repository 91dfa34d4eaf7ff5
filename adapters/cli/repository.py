"""Which configuration and repository a command works on: ``supervisor.toml`` found from
``--config`` or ``--repo`` (or the current directory), the repository's top and its default
branch, each a ``ConfigError`` with one clear line when it cannot be had. The read-only
commands (cpe status, cpe work list) resolve theirs here without building anything."""

from __future__ import annotations

import subprocess
from pathlib import Path

from adapters.cli.settings import CpeConfig, load_config, parse_config
from domain.errors import ConfigError, CpeError

CONFIG_NAME = "supervisor.toml"


def resolve_config(config_path: Path | None, repo: Path | None) -> tuple[CpeConfig, Path]:
    """The configuration and the repository it applies to.

    ``[repository] path`` is relative to the config file: ``--config``'s, else the one in the
    repository (``--repo`` or the current directory, or the top of its repository when run
    from a subdirectory)."""
    hint = "--repo PATH"
    if config_path is not None:
        config = load_config(config_path)
        base = config_path.resolve().parent
        hint = f"[repository] path in {config_path}, or --repo PATH"
    else:
        base = (repo or Path.cwd()).resolve()
        if not (base / CONFIG_NAME).exists() and base.is_dir():
            base = _toplevel(base) or base  # a subdirectory: the repository's own config
        candidate = base / CONFIG_NAME
        config = load_config(candidate) if candidate.exists() else parse_config({})
    root = repo or (base / config.repository.path)
    return config, git_toplevel(root, hint if repo is None else "")


def git_toplevel(path: Path, hint: str = "") -> Path:
    expected = "a git repository (git init)" + (f", or {hint}" if hint else "")
    if not path.is_dir():
        raise ConfigError(f"{path}: no such directory", expected=expected)
    result = _rev_parse_toplevel(path)
    if result.returncode == 0:
        return Path(result.stdout.strip())
    if "dubious ownership" in result.stderr:
        # Typical of a tarball unpacked as root, or a checkout mounted into a container: git
        # itself refuses to work there, so nothing of cpe could.
        raise ConfigError(
            f"{path}: git refuses this repository: it belongs to another user "
            "(detected dubious ownership)",
            expected=f"a repository of your own user, or: git config --global --add "
            f"safe.directory {path}",
        )
    raise ConfigError(f"{path}: not a git repository", expected=expected)


def _toplevel(path: Path) -> Path | None:
    result = _rev_parse_toplevel(path)
    return Path(result.stdout.strip()) if result.returncode == 0 else None


def _rev_parse_toplevel(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def default_branch(config: CpeConfig, repo: Path) -> str:
    from adapters.providers.git import GitRepo, detect_default_branch  # noqa: PLC0415

    name = config.repository.default_branch
    if not name:
        try:
            name = detect_default_branch(GitRepo(repo))
        except CpeError as exc:
            raise ConfigError(
                f"{repo}: no default branch",
                expected="a first commit, or repository.default_branch",
            ) from exc
    check = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"refs/heads/{name}"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    if check.returncode != 0:
        source = "repository.default_branch" if config.repository.default_branch else "detected"
        raise ConfigError(
            f"no default branch: {name!r} ({source}) has no commit in {repo}",
            expected="a first commit on it, or repository.default_branch naming a branch",
        )
    return name
