"""Settings of the GitHub provider: what ``[provider.github]`` in ``supervisor.toml`` holds, plus
the knobs tests and the benchmark turn (base URL, retry waits, polling cadence).

The ``supervisor.toml`` schema (adapters/cli/settings.py) embeds this model, so the section is
checked once, when the file loads. It imports no vendor library: loading the file (``cpe status``)
does not import githubkit. Credentials never appear here: ``token_env`` (or
``app_private_key_env``) names the environment variable that holds them, and
adapters/providers/github/auth.py reads it at start.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_API_URL = "https://api.github.com/"


class GitHubSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    repository: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    token_env: str = "GITHUB_TOKEN"
    # finite and at most a day, as every duration in supervisor.toml
    request_timeout: float = Field(default=30, gt=0, le=86_400, allow_inf_nan=False)
    base_url: str = DEFAULT_API_URL
    default_branch: str | None = None
    """None: asked of GitHub once at start (the repository's ``default_branch``)."""
    branch_prefix: str = "cpe/"
    """Implementor branches are ``<prefix><work item id>-<slug>``: how a PR finds its item."""

    # GitHub App installation auth, instead of a token: all three or none.
    app_id: int | None = None
    app_installation_id: int | None = None
    app_private_key_env: str | None = None

    # Who may make work and put words in an agent's prompt (docs/security.md). An issue is a
    # work item only when its author has at least ``trusted_permission`` on the repository, or
    # such a person gave it ``admit_label`` (empty: no admission by label); and, when
    # ``required_labels`` is set, it carries them all. Reviews and comments by anyone else are
    # left out of every prompt. cpe's own login and ``trusted_bots`` are always trusted.
    trusted_permission: Literal["triage", "write", "maintain", "admin"] = "write"
    admit_label: str = "cpe:admit"
    required_labels: tuple[str, ...] = ()
    trusted_bots: tuple[str, ...] = ()
    permission_ttl: float = Field(default=600, gt=0, le=86_400, allow_inf_nan=False)
    """Seconds a person's looked-up permission is kept before it is asked again."""

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
