"""Settings of the GitHub provider: what ``[provider.github]`` in ``supervisor.toml`` holds, plus
the knobs tests and the benchmark turn (base URL, retry waits, polling cadence).

Credentials never appear here: ``token_env`` (or ``app_private_key_env``) names the environment
variable that holds them, and ``resolve_auth`` reads it at start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from githubkit import AppInstallationAuthStrategy, TokenAuthStrategy
from pydantic import BaseModel, ConfigDict, Field

from domain.errors import ConfigError

DEFAULT_API_URL = "https://api.github.com/"


class GitHubSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    repository: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    token_env: str = "GITHUB_TOKEN"
    request_timeout: float = Field(default=30, gt=0)
    base_url: str = DEFAULT_API_URL
    default_branch: str | None = None
    """None: asked of GitHub once at start (the repository's ``default_branch``)."""
    branch_prefix: str = "cpe/"
    """Implementor branches are ``<prefix><work item id>-<slug>``: how a PR finds its item."""

    # GitHub App installation auth, instead of a token: all three or none.
    app_id: int | None = None
    app_installation_id: int | None = None
    app_private_key_env: str | None = None

    # Reads (GET) are retried on 5xx, 429 and rate-limit 403s; writes never are.
    read_attempts: int = Field(default=4, ge=1)
    max_retry_wait: float = Field(default=60, ge=0)
    """A wait longer than this (a primary rate limit resetting in 40 minutes) is not slept: the
    error goes up with ``retry_after`` so the caller reschedules instead of blocking a thread."""
    backoff_initial: float = Field(default=1.0, ge=0)
    secondary_limit_wait: float = Field(default=60, gt=0)
    """A secondary rate limit that names no wait holds every request this long (GitHub asks for
    at least a minute), doubled for each one in a row, up to half an hour."""

    # Writes are paced under GitHub's limits on content creation (about 80 a minute and 500 an
    # hour): at most write_burst + writes_per_minute in any minute (75), and
    # 4 * write_burst + writes_per_hour in any hour (480).
    writes_per_minute: float = Field(default=60, gt=0)
    writes_per_hour: float = Field(default=420, gt=0)
    write_burst: int = Field(default=15, ge=1)

    # Polling cadence, in poll cycles.
    pipeline_grace_cycles: int = Field(default=10, ge=1)
    """A head with no CI yet is asked about every cycle for this many cycles (CI registers its
    checks seconds after a push); after that, like a finished pipeline, only every
    ``settled_recheck_cycles`` cycles (a re-run, a late check)."""
    settled_recheck_cycles: int = Field(default=10, ge=1)
    full_resync_cycles: int = Field(default=720, ge=1)
    """Every this many cycles the issue index is rebuilt from scratch (deleted or transferred
    issues, which no incremental listing reports)."""
    cache_entries: int = Field(default=4096, ge=16)

    @property
    def owner(self) -> str:
        return self.repository.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repository.split("/", 1)[1]


def resolve_auth(
    settings: GitHubSettings, environ: Mapping[str, str] | None = None
) -> TokenAuthStrategy | AppInstallationAuthStrategy:
    """The auth strategy the settings name, with its secret read from the environment."""
    env = os.environ if environ is None else environ
    app = (settings.app_id, settings.app_installation_id, settings.app_private_key_env)
    if any(value is not None for value in app):
        app_id, installation, key_env = app
        if app_id is None or installation is None or key_env is None:
            raise ConfigError(
                "GitHub App auth needs app_id, app_installation_id and app_private_key_env",
                key_path="provider.github",
            )
        key = env.get(key_env)
        if not key:
            raise ConfigError(
                f"environment variable {key_env} (the App's private key) is not set",
                key_path="provider.github.app_private_key_env",
            )
        _check_private_key(key, key_env)
        return AppInstallationAuthStrategy(app_id, key, installation)
    token = env.get(settings.token_env)
    if not token:
        raise ConfigError(
            f"environment variable {settings.token_env} is not set",
            key_path="provider.github.token_env",
            expected="the name of a variable that holds a GitHub token",
        )
    return TokenAuthStrategy(token)


def _check_private_key(key: str, key_env: str) -> None:
    """A key that cannot sign is a configuration error at start, not a failure on every call.
    The message never quotes the key."""
    try:
        loaded = serialization.load_pem_private_key(key.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"environment variable {key_env} does not hold a PEM private key "
            f"({type(exc).__name__})",
            key_path="provider.github.app_private_key_env",
            expected="the GitHub App's private key, as GitHub gave it (-----BEGIN ... KEY-----)",
        ) from None
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise ConfigError(
            f"environment variable {key_env} holds a {type(loaded).__name__}, not an RSA key",
            key_path="provider.github.app_private_key_env",
            expected="the GitHub App's RSA private key",
        )


_TOKEN_PREFIXES = (
    ("github_pat_", "fine-grained personal access token"),
    ("ghp_", "classic personal access token"),
    ("gho_", "OAuth token"),
    ("ghu_", "GitHub App user token"),
    ("ghs_", "GitHub App installation token"),
)


def token_kind(auth: TokenAuthStrategy | AppInstallationAuthStrategy) -> str:
    """What kind of credential this is, in words (GitHub's token prefixes say it)."""
    if isinstance(auth, AppInstallationAuthStrategy):
        return "GitHub App installation token"
    for prefix, kind in _TOKEN_PREFIXES:
        if auth.token.startswith(prefix):
            return kind
    return "token"
