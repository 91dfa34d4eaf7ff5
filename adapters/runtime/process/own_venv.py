"""cpe's own virtual environment stays cpe's: it never reaches a pipeline's or an agent's PATH.

cpe runs other projects' commands: the pipeline's test command (``python -m pytest``) and what
agents run (``python3 …``). With cpe's virtual environment's ``bin`` on the PATH they get (an
activated venv, or ``export PATH=…/cpe/.venv/bin:$PATH``), their ``python`` is cpe's
interpreter with cpe's packages: the project's tests import cpe's ``attrs`` or ``pydantic``
instead of their own, and the default branch reads red for a reason that is not the project's.
So that directory is taken off PATH, and ``VIRTUAL_ENV`` is dropped when it names cpe's
environment. Only cpe's own: the user's project venv on PATH, or a ``pipeline_command`` naming
an interpreter, stays as it is (the CLI warns when that interpreter is cpe's).

When cpe runs outside a virtual environment (``sys.prefix == sys.base_prefix``) it has nothing
of its own to take away: its interpreter is the system's, the user's as much as cpe's.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

__all__ = ["own_bin_dirs", "own_program_in", "own_venv", "without_own_venv"]


def own_venv() -> Path | None:
    """cpe's virtual environment (``sys.prefix``), or None when cpe runs outside one."""
    if sys.prefix == sys.base_prefix:
        return None
    return Path(sys.prefix)


def own_bin_dirs() -> frozenset[str]:
    """The resolved directories cpe's interpreter and console scripts are in (empty outside a
    virtual environment)."""
    venv = own_venv()
    if venv is None:
        return frozenset()
    return frozenset(os.path.realpath(d) for d in (venv / "bin", Path(sys.executable).parent))


def without_own_venv(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with cpe's own ``bin`` taken off ``PATH`` (however it is spelled: entries are
    compared resolved) and ``VIRTUAL_ENV`` dropped when it names cpe's environment. A PATH that
    held nothing else becomes ``os.defpath``, what a program without PATH searches."""
    venv = own_venv()
    out = dict(env)
    if venv is None:
        return out
    dirs = own_bin_dirs()
    if "PATH" in out:
        kept = [
            entry
            for entry in out["PATH"].split(os.pathsep)
            if not entry or os.path.realpath(entry) not in dirs  # "" is the cwd: not ours
        ]
        out["PATH"] = os.pathsep.join(kept) or os.defpath
    if "VIRTUAL_ENV" in out and os.path.realpath(out["VIRTUAL_ENV"]) == os.path.realpath(venv):
        del out["VIRTUAL_ENV"]
    return out


def own_program_in(command: str | Sequence[str], path: str) -> str | None:
    """The first program of cpe's own virtual environment that ``command`` names, found as a
    shell would on ``path`` (the PATH the command gets), or None.

    ``command`` is a shell line or an argv list; an argument with a space in it (``sh -c "…"``)
    is read as a shell line too. Relative paths (``.venv/bin/python``) are the project's own:
    they resolve in the checkout the command runs in, never in cpe's environment."""
    dirs = own_bin_dirs()
    if not dirs:
        return None
    for word in _words(command):
        if os.path.isabs(word):
            found: str | None = word
        elif "/" in word:
            continue
        else:
            found = shutil.which(word, path=path)
        if found and os.path.realpath(os.path.dirname(found)) in dirs:
            return found
    return None


def _words(command: str | Sequence[str]) -> Iterator[str]:
    if isinstance(command, str):
        yield from _split(command)
        return
    for argument in command:
        yield argument
        if any(c.isspace() for c in argument):
            yield from _split(argument)


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:  # an unbalanced quote: its words as they stand are good enough here
        return line.split()
