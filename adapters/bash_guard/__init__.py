"""The Bash guard: the validator behind every agent's ``PreToolUse`` hook for the Bash tool.

Agents must never write to the outside world themselves (docs/security.md). :func:`check_bash`
splits a command line into every simple command it can run (:mod:`.split`: lists, pipelines,
subshells, groups, ``if``/``while``/``for``/``case``, functions, ``$(…)``, backticks, process
substitutions, heredocs), unwraps what runs other commands (:mod:`.wrappers`: ``bash -c``,
``eval``, ``env``, ``xargs``, ``timeout``, ``uv run``… and ``find -exec``) and denies, with a
reason, when one of them would:

- push, talk to the code host (``gh``, ``hub``), change remotes, leave the worktree branch,
  or write the refs, config or credentials the worktree shares with the repository
  (:mod:`.git_rules`);
- write, move, delete or change a path outside the worktree (:mod:`.paths`: operands of
  ``rm``, ``mv``, ``cp``, ``tee``, ``chmod``, ``ln``…; redirection targets; ``cd``, ``pushd``
  targets), through ``~``, ``$HOME``, ``..``, a glob that can match ``..``, a symlink that
  already points out, or into ``.git``; or make ``cd`` look directories up elsewhere
  (``CDPATH``, ``shopt -s cdable_vars``);
- read or write a credential store (``~/.ssh``, ``~/.netrc``, ``~/.claude/.credentials.json``,
  ``~/.npmrc``, ``~/.aws``, ``/etc/shadow``…), by name or through a directory a command reads
  whole (``grep -r``, ``rg``, ``tar``), a glob or a link that reaches one (:mod:`.secrets`);
  another process's environment (``/proc/*/environ``); the main repository's ``.git`` beyond
  the worktree's own files; any repository's ``.git/config`` (or its kin), however the path
  gets there (``cat .git/config`` in a main checkout, ``head ../../.git/config``);
- serve files (``python -m http.server``), upload (``curl -d``, ``scp``, ``rsync host:``),
  publish (``npm publish``, ``twine upload``, ``cargo publish``, ``docker push``…), run as
  another user (``sudo``), or change the host (:mod:`.policy`);
- run a command word only known at run time (``$CMD args``, ``"$(which x)" args``), write a
  path only known at run time, or run a script read from stdin.

Anything the splitter cannot parse is denied: the guard fails closed. It is a tripwire for
what an agent would plausibly type, not a sandbox: programs the agent writes and runs
(``python script.py``, ``make``, ``npm run``) are not inspected. The OS sandbox
(``adapters.runtime.sandbox``) holds those.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.bash_guard.config import DEFAULT_PROTECTED_PATHS, BashGuardConfig

if TYPE_CHECKING:
    from adapters.bash_guard.guard import (
        BashVerdict,
        check_bash,
        check_bash_main,
        render_verdict,
    )
    from adapters.bash_guard.words import BashParseError

_GUARD = frozenset({"BashVerdict", "check_bash", "check_bash_main", "render_verdict"})


def __getattr__(name: str) -> Any:
    """The guard itself, imported on first use: reading the configuration (every cpe command)
    needs the config module alone, not the splitter and every rule."""
    if name in _GUARD:
        from adapters.bash_guard import guard  # noqa: PLC0415

        return getattr(guard, name)
    if name == "BashParseError":
        from adapters.bash_guard import words  # noqa: PLC0415

        return words.BashParseError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_PROTECTED_PATHS",
    "BashGuardConfig",
    "BashParseError",
    "BashVerdict",
    "check_bash",
    "check_bash_main",
    "render_verdict",
]
