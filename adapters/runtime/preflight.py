"""Preflight: can the agent CLIs reach a model at all, and can their commands be sandboxed?
Checked at start, offline.

Without a credential every run fails within a second of starting, so cpe refuses to start
(exit 78) with one line saying what to set, instead of spending the items' attempts. What
counts, per runtime:

- ``claude-sdk`` and ``claude-cli``: an API key or token in the environment the CLI gets
  (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, ``CLAUDE_CODE_OAUTH_TOKEN``), a cloud
  provider switched on (``CLAUDE_CODE_USE_BEDROCK`` / ``_VERTEX``, which bring their own), or a
  Claude login: ``~/.claude/.credentials.json`` on Linux (on macOS the login is in the
  keychain, which cannot be read offline, so a login is assumed).
- ``codex-cli``: ``OPENAI_API_KEY`` or ``CODEX_API_KEY``, or a ``codex login``
  (``$CODEX_HOME/auth.json``, by default ``~/.codex/auth.json``).

A run with an isolated home (``cpe demo``, the tests) sees no login of the user's, so only the
environment counts there. Whether the credential is *valid* is only known when the model
answers: that is the runtime's to report, as an infrastructure failure.

Each CLI in use must also answer ``--version`` with a version cpe supports
(``check_cli_version``, :data:`MIN_VERSIONS`: the oldest cpe is tested with): an older CLI
lacks flags or events cpe relies on, and one that cannot even say its version would fail every
run at start.

The sandbox (:func:`find_sandbox`): bubblewrap must be installed and able to set up, here and
now, a sandbox like the runs' (new pid, ipc, uts and network namespaces, the file system
read-only): a trial command must run in it, and fail to write. Without one, agents would run
held by the Bash guard alone; ``[sandbox] required`` (default true) makes that a refusal to
start (exit 78, one line saying which protection is missing).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import subprocess
import sys
from collections.abc import Collection, Mapping
from pathlib import Path

from adapters.bash_guard import DEFAULT_PROTECTED_PATHS
from adapters.runtime.sandbox import SANDBOX_HIDDEN, Sandbox, SandboxConfig
from domain.errors import ConfigError

CLAUDE_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
CLAUDE_CLOUDS = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX")
CODEX_KEYS = ("OPENAI_API_KEY", "CODEX_API_KEY")

# The oldest version of each CLI cpe is tested with: claude 2.1 brought the --agents and
# --json-schema flags cpe passes; codex's exec --json events are checked on 0.169.
MIN_VERSIONS = {"claude": (2, 1, 0), "codex": (0, 169, 0)}
INSTALL_HINTS = {
    "claude": "npm install -g @anthropic-ai/claude-code, or leave cli_path empty for the "
    "claude CLI bundled with claude-agent-sdk",
    "codex": "npm install -g @openai/codex",
}
_VERSION = re.compile(r"(?<![\d.])(\d+)\.(\d+)\.(\d+)")
VERSION_TIMEOUT = 30.0  # seconds; a CLI answers --version in milliseconds


def cli_version(path: str, *, timeout: float = VERSION_TIMEOUT) -> tuple[int, int, int] | str:
    """``path --version`` as (major, minor, patch), or what went wrong, in words."""
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"`{path} --version` did not answer within {timeout:.0f} s"
    except OSError as exc:
        return f"`{path} --version` could not start: {exc.strerror or exc}"
    output = (done.stdout + done.stderr).strip()
    found = _VERSION.search(done.stdout) or _VERSION.search(done.stderr)
    if done.returncode != 0 or found is None:
        said = " ".join(output.split())[:200] or "nothing"
        return f"`{path} --version` exited {done.returncode} and said {said!r}"
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


def check_cli_version(runtime: str, cli: str, path: str, key: str) -> str:
    """The CLI's version as text; a ``ConfigError`` naming ``key`` when the CLI at ``path``
    cannot say its version or is older than cpe supports. ``cli`` is ``claude`` or ``codex``."""
    minimum = MIN_VERSIONS[cli]
    wanted = ".".join(map(str, minimum))
    found = cli_version(path)
    if isinstance(found, str):
        raise ConfigError(
            f"{key}: the {cli} CLI for runtime {runtime} does not work: {found}",
            expected=f"{cli} {wanted} or newer ({INSTALL_HINTS[cli]})",
        )
    if found < minimum:
        version = ".".join(map(str, found))
        raise ConfigError(
            f"{key}: {cli} {version} at {path} is older than runtime {runtime} supports",
            expected=f"{cli} {wanted} or newer ({INSTALL_HINTS[cli]})",
        )
    return ".".join(map(str, found))


def claude_credential(env: Mapping[str, str], home: Path | None) -> str | None:
    """What gives the claude CLI its model (a variable's name or a login file), or None."""
    for name in (*CLAUDE_KEYS, *CLAUDE_CLOUDS):
        if env.get(name, "").strip():
            return name
    if home is None:
        return None
    if sys.platform == "darwin":
        return "the keychain's Claude login"
    login = home / ".claude" / ".credentials.json"
    return str(login) if login.is_file() and login.stat().st_size > 0 else None


def codex_credential(env: Mapping[str, str], home: Path | None) -> str | None:
    for name in CODEX_KEYS:
        if env.get(name, "").strip():
            return name
    if home is None:
        return None
    codex_home = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
    login = codex_home / "auth.json"
    return str(login) if login.is_file() and login.stat().st_size > 0 else None


def check_credentials(
    kinds: Collection[str],
    agent_env: Mapping[str, str],
    *,
    isolated_home: bool,
    environ: Mapping[str, str] | None = None,
    codex_overrides: Collection[str] = (),
) -> None:
    """``ConfigError`` naming what to set when a runtime in ``kinds`` has no credential.
    ``agent_env`` is what cpe adds on purpose (the demo's scripted model); ``environ`` is the
    daemon's environment (default ``os.environ``), from which the model variables pass. A codex
    given another model provider (``-c model_provider=…``) takes its key from that provider's
    own settings, so only the default provider's key is looked for."""
    env = {**(os.environ if environ is None else environ), **agent_env}
    home = None if isolated_home else Path(env.get("HOME") or Path.home())
    if {"claude-sdk", "claude-cli"} & set(kinds) and claude_credential(env, home) is None:
        runtimes = ", ".join(sorted({"claude-sdk", "claude-cli"} & set(kinds)))
        raise ConfigError(
            f"runtime {runtimes}: no model credential for the claude CLI",
            expected="ANTHROPIC_API_KEY in cpe's environment, or a Claude login (claude, then "
            "/login: ~/.claude/.credentials.json)",
        )
    own_provider = any(o.strip().startswith("model_provider") for o in codex_overrides)
    if "codex-cli" in kinds and not own_provider and codex_credential(env, home) is None:
        raise ConfigError(
            "runtime codex-cli: no model credential for the codex CLI",
            expected="OPENAI_API_KEY in cpe's environment, or codex login (~/.codex/auth.json)",
        )


# The model credentials the agent CLIs hold; their commands never need them.
MODEL_SECRETS = (*CLAUDE_KEYS, *CODEX_KEYS)
_TRIAL = "if : > /etc/.cpe-sandbox-probe 2>/dev/null; then echo writable; exit 3; fi; echo held"
_INSTALL = "apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap (Fedora)"


def find_sandbox(
    config: SandboxConfig,
    *,
    environ: Mapping[str, str] | None = None,
    proxy_socket: str | None = None,
) -> Sandbox | str:
    """The sandbox agent commands run in on this machine, or why there is none (one line
    naming the missing protection). ``proxy_socket``: cpe's registry proxy (allow_install)."""
    env = os.environ if environ is None else environ
    bwrap = shutil.which("bwrap", path=env.get("PATH") or os.defpath)
    if bwrap is None:
        return (
            "bubblewrap (bwrap) is not installed, so agent commands cannot be confined by the "
            f"kernel (no filesystem, network or process isolation): {_INSTALL}"
        )
    shell = shutil.which("bash", path=env.get("PATH") or os.defpath) or "/bin/bash"
    trial = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    trial += ["--unshare-cgroup-try", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev"]
    trial += ["--proc", "/proc", "--tmpfs", "/run", "--tmpfs", "/tmp", "--", shell, "-c", _TRIAL]
    try:
        done = subprocess.run(trial, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({bwrap}) could not be started: {exc}"
    if done.returncode != 0 or done.stdout.strip() != "held":
        said = (done.stderr.strip().splitlines() or [done.stdout.strip() or "no output"])[-1]
        return (
            f"bubblewrap ({bwrap}) cannot set up a sandbox here ({said}): no namespaces for it "
            "(user namespaces off, or a container without them)"
        )
    version = subprocess.run(
        [bwrap, "--version"], capture_output=True, text=True, timeout=60, check=False
    ).stdout.strip()
    protected = (*DEFAULT_PROTECTED_PATHS, *SANDBOX_HIDDEN, *config.protected_paths)
    return Sandbox(
        bwrap=bwrap,
        version=version,
        shell=shell,
        python=sys.executable,
        installation=_installation(),
        homes=_homes(env),
        protected=protected,
        network="registries" if config.allow_install else "none",
        registries=config.registries if config.allow_install else (),
        proxy_socket=proxy_socket if config.allow_install else None,
        unset_env=MODEL_SECRETS,
        identity=_identity(),
    )


def _installation() -> tuple[str, ...]:
    """cpe's interpreter environment (the virtual environment, its base) and the directory its
    packages are imported from (an editable install's checkout)."""
    source = Path(__file__).resolve().parents[2]  # adapters/runtime/preflight.py
    places = [sys.prefix, sys.base_prefix, str(source)]
    return tuple(dict.fromkeys(os.path.realpath(p) for p in places if os.path.isdir(p)))


def check_sandbox(
    config: SandboxConfig,
    *,
    environ: Mapping[str, str] | None = None,
    proxy_socket: str | None = None,
) -> Sandbox | str:
    """:func:`find_sandbox`, and a ``ConfigError`` when there is none and one is required;
    otherwise why there is none (the runs record it)."""
    found = find_sandbox(config, environ=environ, proxy_socket=proxy_socket)
    if isinstance(found, str) and config.required:
        raise ConfigError(
            f"sandbox: {found}",
            expected="bubblewrap able to run here, or [sandbox] required = false to run agents "
            "confined by the Bash guard alone",
        )
    return found


def _homes(env: Mapping[str, str]) -> tuple[str, ...]:
    """Every home directory on the machine whose credential stores commands must not see."""
    homes = [env.get("HOME") or "", "/root", *sorted(glob.glob("/home/*"))]
    with contextlib.suppress(KeyError, OSError):
        homes.insert(0, pwd.getpwuid(os.getuid()).pw_dir)
    found = [os.path.realpath(h) for h in homes if h and os.path.isdir(h)]
    return tuple(dict.fromkeys(h for h in found if h != "/"))


def _identity() -> tuple[str, str]:
    """The user's git identity, for commits an agent makes in its sandbox."""
    values = []
    for key, default in (("user.name", "cpe agent"), ("user.email", "agent@cpe.invalid")):
        try:
            out = subprocess.run(
                ["git", "config", "--global", key],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            ).stdout.strip()
        except OSError:
            out = ""
        values.append(out or default)
    return values[0], values[1]
