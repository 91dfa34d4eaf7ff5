"""The environment an agent process gets: an allowlist, with secrets removed even from that.

Agents run untrusted, model-written commands, so they must never see a credential of the
daemon (docs/security.md). The rule, in order:

1. **Allowlist.** Only variables whose name matches a pattern in ``allow`` (``fnmatch``,
   case-sensitive: ``LC_*`` matches ``LC_ALL``) are copied from ``base``. The default,
   :data:`DEFAULT_ALLOW`, is what tools need to run: ``PATH``, ``HOME``, user and shell,
   locale, terminal, temp dirs, proxies and CA bundles, git identity.
2. **Secret names are dropped, even when allowed.** A name is secret when, upper-cased, it
   contains ``TOKEN``, ``SECRET``, ``PASS`` (``PASSWORD``, ``ASKPASS``…), ``PWD``, ``KEY``,
   ``CREDENTIAL``, ``CREDS``, ``PRIVATE``, ``COOKIE``, ``SESSION_ID`` or ``AUTH`` (including
   ``AUTHORIZATION``, but not the word ``AUTHOR``: ``GIT_AUTHOR_NAME`` is fine); has a word
   ``PAT`` or ``DSN``; or starts with the prefix of a family that carries credentials:
   ``AWS_``, ``AZURE_``, ``ARM_``, ``GOOGLE_``, ``GCLOUD_``, ``GCP_``, ``CLOUDSDK_``,
   ``VAULT_``, ``SSH_``, ``GPG_``, ``GNUPG``, ``KUBE``, ``DOCKER_``, ``NETRC``, ``GH_``,
   ``GITHUB_``, ``GIT_CONFIG`` (config injection can add a credential helper or an auth
   header). So ``GITHUB_TOKEN``, ``GH_TOKEN``, ``NPM_TOKEN``, ``ANTHROPIC_API_KEY``, ``AWS_*``
   and ``SSH_AUTH_SOCK`` never pass.
3. **Token-shaped values are dropped, whatever the name.** Known formats (GitHub
   ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``, GitLab ``glpat-``, ``sk-…``,
   Slack ``xox?-``, AWS key ids ``AKIA``/``ASIA``, Google ``AIza``, ``npm_``), JWTs, PEM
   private keys, ``Bearer``/``Basic``/``token`` credentials, URLs with ``user:password@``;
   and high-entropy strings. For those, the value is cut into runs of ``[A-Za-z0-9+/=_-]``;
   a run that starts with ``/`` is an absolute path and is not judged (Nix store hashes in
   ``PATH`` look random on purpose); otherwise a run is a token when it mixes upper and lower
   case and either one of its ``/``-separated pieces is 24+ characters with 4+ bits of
   entropy per character, or the whole run (with its ``/``, as standard base64 has) is 32+
   characters with 4.6+ bits. Known gaps, covered only by rules 1 and 2: single-case secrets
   (lower-case hex), tokens under 24 characters, base64 that happens to start with ``/``.
   The other way, a long CamelCase word can be taken for a token: dropping a harmless
   variable is the side we choose to err on.
4. **``extra`` is trusted and wins.** It is what the runtime injects on purpose
   (``ANTHROPIC_BASE_URL``, ``IS_SANDBOX=1``, the model key the CLI needs) and is copied as is,
   after the filtering: it is the one door through which a key reaches an agent, so only the
   runtime may open it.

``HOME`` passes the allowlist: a runtime that must hide the user's dotfiles (``~/.config/gh``,
``~/.ssh``) gives the agent a throwaway ``HOME`` through ``extra``. cpe's own virtual
environment is taken off ``base`` first (its ``bin`` off ``PATH``, ``VIRTUAL_ENV`` naming it):
an agent's ``python3`` is the project's, never cpe's (``own_venv``).
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from types import MappingProxyType

from adapters.runtime.process.own_venv import without_own_venv

__all__ = [
    "run_env",
    "DEFAULT_ALLOW",
    "build_agent_env",
    "is_secret_name",
    "looks_like_token",
]

DEFAULT_ALLOW: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "TMPDIR",
    "TMP",
    "TEMP",
    # Package managers behind a corporate proxy need these; a proxy URL carrying a password
    # is caught by the value rule.
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    # Agents may commit inside their worktree; an identity is not a secret.
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
)

_EMPTY: Mapping[str, str] = MappingProxyType({})

_SECRET_NAME = re.compile(
    r"""
    TOKEN | SECRET | PASS | PWD | KEY | CREDENTIAL | CREDS | PRIVATE | COOKIE | SESSION_ID
    | AUTH(?!OR(?:S|_|$))
    | (?:^|_)(?:PAT|DSN)(?:_|$)
    | ^(?:AWS_|AZURE_|ARM_|GOOGLE_|GCLOUD_|GCP_|CLOUDSDK_|VAULT_|SSH_|GPG_|GNUPG|KUBE|DOCKER_
        |NETRC|GH_|GITHUB_|GIT_CONFIG)
    """,
    re.VERBOSE,
)

# Each shape is anchored so that it does not fire inside an ordinary word ("disk-…" is not "sk-").
_B = r"(?<![A-Za-z0-9_])"
_TOKEN_SHAPES = re.compile(
    rf"""
    {_B}gh[pousr]_[A-Za-z0-9]{{20,}}
    | {_B}github_pat_[A-Za-z0-9_]{{20,}}
    | {_B}glpat-[A-Za-z0-9_-]{{16,}}
    | {_B}sk-[A-Za-z0-9_-]{{16,}}
    | {_B}xox[abposr]-[A-Za-z0-9-]{{8,}}
    | {_B}(?:AKIA|ASIA)[0-9A-Z]{{16}}
    | {_B}AIza[0-9A-Za-z_-]{{30,}}
    | {_B}npm_[A-Za-z0-9]{{30,}}
    | {_B}eyJ[A-Za-z0-9_-]{{8,}}\.[A-Za-z0-9_-]{{8,}}\.
    | -----BEGIN[ A-Z]*PRIVATE[ ]KEY-----
    | {_B}(?:Bearer|Basic|token)\s+[A-Za-z0-9._~+/=-]{{16,}}
    | {_B}[A-Za-z][A-Za-z0-9+.-]{{0,31}}://[^\s/:@]*:[^\s/@]+@
    """,
    re.VERBOSE | re.IGNORECASE,
)
_RUN = re.compile(r"[A-Za-z0-9+/=_-]+")
_MIN_PIECE = 24
_MIN_ENTROPY_BITS = 4.0
# Standard base64 contains '/', so a run with slashes is also judged whole, a little stricter:
# relative paths with long CamelCase names stay under 4.5 bits, base64 of 24 bytes is above 4.6.
_MIN_SLASHED = 32
_MIN_SLASHED_ENTROPY_BITS = 4.6


def is_secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a credential (rule 2 of the module docstring)."""
    return _SECRET_NAME.search(name.upper()) is not None


def looks_like_token(value: str) -> bool:
    """Whether a value looks like a credential (rule 3 of the module docstring)."""
    if _TOKEN_SHAPES.search(value):
        return True
    return any(_is_high_entropy(run) for run in _RUN.findall(value))


def _is_high_entropy(run: str) -> bool:
    if run.startswith("/"):
        # An absolute path (PATH, HOME, TMPDIR…): its components are names, and Nix store
        # hashes in PATH are random-looking on purpose. Known token shapes still apply.
        return False
    if not _mixed_case(run):
        return False
    if "/" in run and len(run) >= _MIN_SLASHED and _entropy(run) >= _MIN_SLASHED_ENTROPY_BITS:
        return True
    return any(
        len(piece) >= _MIN_PIECE and _mixed_case(piece) and _entropy(piece) >= _MIN_ENTROPY_BITS
        for piece in run.split("/")
    )


def _mixed_case(run: str) -> bool:
    return any(c.isupper() for c in run) and any(c.islower() for c in run)


def _entropy(run: str) -> float:
    """Shannon entropy of the run's own characters, in bits per character."""
    counts = Counter(run)
    return -sum(n / len(run) * math.log2(n / len(run)) for n in counts.values())


def build_agent_env(
    base: Mapping[str, str],
    *,
    allow: Sequence[str] = DEFAULT_ALLOW,
    extra: Mapping[str, str] = _EMPTY,
) -> dict[str, str]:
    """The agent's environment: allowed, non-secret variables of ``base`` without cpe's own
    virtual environment, then ``extra``."""
    env = {
        name: value
        for name, value in without_own_venv(base).items()
        if any(fnmatchcase(name, pattern) for pattern in allow)
        and not is_secret_name(name)
        and not looks_like_token(value)
    }
    env.update(extra)
    return env


def run_env(
    model_variables: Sequence[str],
    agent_env: Mapping[str, str],
    home: Path | None = None,
    *,
    euid: int | None = None,
) -> dict[str, str]:
    """One agent run's environment: the allowlisted part of ours, the model's own credentials
    and endpoint (``model_variables``, passed on purpose), what the config adds on purpose,
    ``IS_SANDBOX=1`` as root (the claude CLI refuses bypassPermissions as root without it),
    and ``home`` as HOME when given (created). ``euid`` is the user the agent runs as (default:
    ours, ``os.geteuid()``)."""
    extra = {name: value for name in model_variables if (value := os.environ.get(name))}
    extra.update(agent_env)
    if (os.geteuid() if euid is None else euid) == 0:
        extra["IS_SANDBOX"] = "1"
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
        extra["HOME"] = str(home)
    return build_agent_env(os.environ, extra=extra)
