"""A GitHub App installed on the fake's repository: installation access tokens for a JWT.

``POST /app/installations/{id}/access_tokens`` takes ``Authorization: Bearer <JWT>``, the JWT
signed RS256 with the App's private key (``iss`` its app id, as a string or a number; ``iat``
and ``exp`` at most ten minutes apart), and answers 201 with a fresh installation token
(``ghs_...``) and its ``expires_at``. The token is then accepted, as ``token`` or ``Bearer``,
like a configured token, until it expires: after that it is ``401 Bad credentials``, as on
GitHub. The fake only holds the App's public key, as GitHub does. ``GET /app`` with a JWT names
the App (its ``slug``: its bot is ``<slug>[bot]``).

Time is the App's own ``clock`` (default ``time.time``): a test that advances it expires tokens
and JWTs without waiting. Every token issued is kept in ``grants``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.clock import EPOCH_START, iso
from tests.fakes.github import payloads
from tests.fakes.github.records import Access
from tests.fakes.github.server import Call
from tests.fakes.http import HttpError, Reply, Router

if TYPE_CHECKING:
    from tests.fakes.github.fake import FakeGitHub

JWT_MAX_LIFETIME = 600  # GitHub: "exp" no more than 10 minutes into the future
CLOCK_DRIFT = 60  # an "iat" this far in the future is still taken (GitHub allows some drift)
DEFAULT_PERMISSIONS = {
    "checks": "read",
    "contents": "write",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
    "statuses": "read",
}

_UNDECODABLE = "A JSON web token could not be decoded"
_EXPIRED_JWT = (
    "'Expiration time' claim ('exp') must be a numeric value representing the future time at "
    "which the assertion expires"
)
_FAR_JWT = "'Expiration time' claim ('exp') is too far in the future"
_EARLY_JWT = (
    "'Issued at' claim ('iat') must be an Integer representing the time that the assertion "
    "was issued"
)


@dataclass(frozen=True)
class TokenGrant:
    """One installation token the fake issued, and the JWT claims it was issued for."""

    token: str
    installation_id: int
    issued_at: float
    expires_at: int
    claims: dict[str, Any]
    permissions: dict[str, str]


@dataclass
class FakeApp:
    """The App: its id, the one installation (on the fake's repository) and its public key.

    ``token_lifetime``: seconds an installation token lives (GitHub: one hour).
    """

    app_id: int
    installation_id: int
    public_key: str
    slug: str = "cpe-app"
    token_lifetime: float = 3600
    clock: Callable[[], float] = time.time
    permissions: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PERMISSIONS))
    """What the installation was granted (a token may be narrowed to less, never more)."""
    grants: list[TokenGrant] = field(default_factory=list)
    revoked: set[str] = field(default_factory=set)

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]"

    def access(self, token: str) -> Access | None:
        """The installation's bot, with the token's permissions, for a live installation token;
        None otherwise."""
        for grant in self.grants:
            if grant.token == token:
                if self.clock() >= grant.expires_at or token in self.revoked:
                    return None
                return Access(self.bot_login, "app", permissions=grant.permissions)
        return None

    def revoke(self, token: str) -> None:
        """Refuse ``token`` from now on, before its expiry (``DELETE /installation/token``, an
        App suspended): a client must not keep sending it."""
        self.revoked.add(token)

    def verify_jwt(self, authorization: str) -> dict[str, Any]:
        """The claims of a valid App JWT in an ``Authorization`` header; a 401 otherwise."""
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise HttpError(401, _UNDECODABLE)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self.public_key,
                algorithms=["RS256"],
                # Times are checked below against the App's clock, not the machine's.
                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
            )
        except jwt.PyJWTError as exc:
            raise HttpError(401, _UNDECODABLE) from exc
        issuer = claims.get("iss")
        if isinstance(issuer, bool) or not isinstance(issuer, str | int):
            raise HttpError(401, _UNDECODABLE)
        if str(issuer) != str(self.app_id):
            raise HttpError(401, "Integration not found")
        iat, exp = _seconds(claims.get("iat")), _seconds(claims.get("exp"))
        if iat is None or exp is None:
            raise HttpError(401, _UNDECODABLE)
        now = self.clock()
        if exp <= now:
            raise HttpError(401, _EXPIRED_JWT)
        if iat > now + CLOCK_DRIFT:
            raise HttpError(401, _EARLY_JWT)
        if exp > now + JWT_MAX_LIFETIME or exp - iat > JWT_MAX_LIFETIME + CLOCK_DRIFT:
            raise HttpError(401, _FAR_JWT)
        return claims

    def issue(
        self, installation_id: int, claims: dict[str, Any], permissions: dict[str, str]
    ) -> TokenGrant:
        """A fresh installation token; 404 for an installation this App does not have."""
        if installation_id != self.installation_id:
            raise HttpError(404, "Not Found")
        now = self.clock()
        grant = TokenGrant(
            "ghs_" + secrets.token_hex(18),
            installation_id,
            now,
            int(now + self.token_lifetime),
            claims,
            permissions,
        )
        self.grants.append(grant)
        return grant


@dataclass
class ManualClock:
    """A ``FakeApp.clock`` a test moves by hand (starting from the machine's time, which is
    what a client signs its JWTs with)."""

    now: float = field(default_factory=time.time)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _seconds(value: object) -> float | None:
    """A NumericDate claim's value; None when the claim is missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def rsa_key_pair() -> tuple[str, str]:
    """A fresh App key pair: (private key PEM, as GitHub hands it out; public key PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # "BEGIN RSA PRIVATE KEY", as GitHub's
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private.decode(), public.decode()


def register(router: Router, gh: FakeGitHub, app: FakeApp) -> None:
    def create_access_token(call: Call) -> Reply:
        claims = app.verify_jwt(call.authorization)
        body = call.body or {}
        names = body.get("repositories")
        ids = body.get("repository_ids")
        if (names and set(names) != {gh.repo}) or (ids and set(ids) != {payloads.REPOSITORY_ID}):
            raise HttpError(
                422,
                "There is at least one repository that does not exist or is not accessible "
                "to the parent installation.",
            )
        wanted = body.get("permissions") or {}
        for name, level in wanted.items():
            granted = app.permissions.get(name)
            if granted is None or (level == "write" and granted != "write"):
                raise HttpError(
                    422, "The permissions requested are not granted to this installation."
                )
        permissions = dict(wanted) if wanted else dict(app.permissions)
        grant = app.issue(int(call.params["installation_id"]), claims, permissions)
        return Reply(
            201,
            {
                "token": grant.token,
                "expires_at": iso(grant.expires_at),
                "permissions": grant.permissions,
                "repository_selection": "selected",
                "repositories": [
                    payloads.repository(gh.urls, gh.default_branch, pushed_at=gh.pushed_at)
                ],
            },
        )

    def get_app(call: Call) -> Reply:
        """``GET /app``: the App the JWT is signed for (its ``slug`` names its bot,
        ``<slug>[bot]``)."""
        app.verify_jwt(call.authorization)
        html = f"{gh.base_url}/apps/{app.slug}"
        return Reply(
            body={
                "id": app.app_id,
                "slug": app.slug,
                "node_id": payloads.node_id("Integration", app.app_id),
                "client_id": f"Iv1.{app.app_id:016x}",
                "owner": payloads.user(gh.urls, gh.owner),
                "name": app.slug,
                "description": None,
                "external_url": html,
                "html_url": html,
                "created_at": iso(EPOCH_START),
                "updated_at": iso(EPOCH_START),
                "permissions": dict(app.permissions),
                "events": [],
                "installations_count": 1,
            }
        )

    router.add(
        "POST",
        r"/app/installations/(?P<installation_id>\d+)/access_tokens",
        create_access_token,
        "apps/create-installation-access-token",
    )
    router.add("GET", "/app", get_app, "apps/get-authenticated")
