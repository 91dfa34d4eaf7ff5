"""The GitHub provider's credentials: the environment variable its settings name
(adapters/providers/github/settings.py) read at start, as a githubkit auth strategy.

Credentials never appear in the settings: ``token_env`` (or ``app_private_key_env``) names the
environment variable that holds them, and ``resolve_auth`` reads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from githubkit import AppInstallationAuthStrategy, TokenAuthStrategy

from adapters.providers.github.settings import GitHubSettings
from domain.errors import ConfigError


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
