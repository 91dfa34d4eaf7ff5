"""``[webhooks]`` in ``supervisor.toml``: the vendors whose deliveries ``cpe run`` takes, each by
the environment variable holding its secret (the secret itself is never in the file, a log line,
an answer or ``/metrics``), the body cap, the gap between two polls a stream of deliveries makes,
and an optional address serving only ``/hooks/*``."""

from __future__ import annotations

import os
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from adapters.host.webhooks.verify import VENDORS, Vendor
from adapters.support.addresses import check_listen
from domain.errors import ConfigError

MIB = 1024 * 1024
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The key naming each vendor's secret (GitLab's is a token sent as it is, not a signing key).
SECRET_KEYS: dict[Vendor, str] = {
    "github": "github_secret_env",
    "gitlab": "gitlab_token_env",
    "linear": "linear_secret_env",
    "jira": "jira_secret_env",
}


class WebhooksSection(BaseModel):
    """``[webhooks]``: empty, no vendor's delivery is taken (``/hooks/*`` answers 404 saying
    which key to set)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    github_secret_env: str = Field(default="", description="the variable holding the secret")
    gitlab_token_env: str = Field(default="", description="the variable holding the token")
    linear_secret_env: str = Field(default="", description="the variable holding the secret")
    jira_secret_env: str = Field(default="", description="the variable holding the secret")
    max_body_bytes: int = Field(
        default=MIB, ge=1024, le=25 * MIB, description="a larger delivery is refused, 413"
    )
    min_gap: float = Field(
        default=1.0,
        ge=0,
        le=60,
        allow_inf_nan=False,
        description="seconds between two polls of a poller deliveries ask for",
    )
    listen: str = Field(
        default="", description="HOST:PORT serving only /hooks/* (port 0: any free one), or empty"
    )

    @field_validator(
        "github_secret_env", "gitlab_token_env", "linear_secret_env", "jira_secret_env"
    )
    @classmethod
    def _env_name(cls, value: str) -> str:
        if value and not _ENV_NAME.match(value):
            raise ValueError(
                "expected the NAME of an environment variable (letters, digits, _), e.g. "
                "CPE_GITHUB_WEBHOOK_SECRET, not the secret itself"
            )
        return value

    @field_validator("listen")
    @classmethod
    def _host_and_port(cls, value: str) -> str:
        return check_listen(
            value,
            example="0.0.0.0:8766",
            when_empty="serve the hooks on the dashboard's address alone",
        )

    def env_names(self) -> dict[Vendor, str]:
        """The configured vendors and the variable of each one's secret."""
        return {
            vendor: getattr(self, SECRET_KEYS[vendor])
            for vendor in VENDORS
            if getattr(self, SECRET_KEYS[vendor])
        }

    def secrets(self, environ: dict[str, str] | None = None) -> dict[Vendor, str]:
        """Each configured vendor's secret, read from its variable; a ``ConfigError`` naming
        the key and the variable when one is unset or empty."""
        env = os.environ if environ is None else environ
        found: dict[Vendor, str] = {}
        for vendor, name in self.env_names().items():
            value = env.get(name, "")
            if not value:
                raise ConfigError(
                    f"webhooks.{SECRET_KEYS[vendor]}: the environment variable {name} is not set",
                    expected="the hook's secret in it, or the key left out to take no "
                    f"{vendor} deliveries",
                )
            found[vendor] = value
        return found
