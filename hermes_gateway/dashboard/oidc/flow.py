"""The authorization code flow against one provider: where to send the browser, and what its code proves.

The provider's metadata is read from `<issuer>/.well-known/openid-configuration` once an hour; its keys
(JWKS) at every callback, since sign-ins are rare and a rotated key then needs no restart. An id_token is
accepted only when signed with one of those keys by an asymmetric algorithm (never `none` or a shared
secret), from the configured issuer, for this client, not expired, carrying the nonce of this browser's
sign-on.

Authlib and joserfc (and through them `cryptography`) are imported by the first sign-on, not with the
dashboard: a gateway whose admins never sign in this way never loads them, and every start is spared them.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import httpx2

from hermes_gateway.dashboard.config import Oidc

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import AsyncOAuth2Client

SCOPE = "openid email profile"
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
METADATA_SECONDS = 3600.0
TIMEOUT = httpx2.Timeout(10.0)
LEEWAY = 60  # seconds of clock difference with the provider allowed on `exp` and `iat`


class Unreachable(Exception):
    """The provider did not answer, or not as a provider does."""


class Refused(Exception):
    """What the provider sent back proves nothing: the reason, for the log and the page."""


class Provider:
    def __init__(self, oidc: Oidc, redirect_uri: str) -> None:
        self.oidc, self.redirect_uri = oidc, redirect_uri
        self._metadata: dict[str, Any] | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()

    async def metadata(self) -> dict[str, Any]:
        async with self._lock:
            if self._metadata is None or time.monotonic() - self._read_at > METADATA_SECONDS:
                found = await _json(f"{self.oidc.issuer}/.well-known/openid-configuration")
                if found.get("issuer") != self.oidc.issuer:  # OpenID Connect Discovery 1.0, section 4.3
                    raise Unreachable(f"the provider names itself {found.get('issuer')!r}, not {self.oidc.issuer!r}")
                for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                    if not isinstance(found.get(key), str):
                        raise Unreachable(f"the provider's metadata has no {key}")
                self._metadata, self._read_at = found, time.monotonic()
            return self._metadata

    async def authorization_url(self, state: str, nonce: str, verifier: str) -> str:
        metadata = await self.metadata()
        async with self._client(metadata) as client:
            url, _ = client.create_authorization_url(metadata["authorization_endpoint"], state=state,
                                                     code_verifier=verifier, nonce=nonce)
        return str(url)

    async def claims(self, code: str, verifier: str, nonce: str) -> dict[str, Any]:
        """The id_token's claims, checked, for the code the provider sent the browser back with."""
        from authlib.integrations.httpx_client import OAuthError

        metadata = await self.metadata()
        try:
            async with self._client(metadata) as client:
                token = await client.fetch_token(metadata["token_endpoint"], grant_type="authorization_code",
                                                 code=code, code_verifier=verifier)
        except OAuthError as exc:
            raise Refused(f"the provider refused the code: {exc.error}") from None
        except (httpx2.HTTPError, ValueError) as exc:
            raise Unreachable(f"the token endpoint failed: {exc}") from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise Refused("the provider sent no id_token")
        keys = await _json(metadata["jwks_uri"])
        return self.checked(id_token, keys, nonce)

    def checked(self, id_token: str, jwks: dict[str, Any], nonce: str) -> dict[str, Any]:
        from joserfc import jwt
        from joserfc.errors import JoseError
        from joserfc.jwk import KeySet

        try:
            decoded = jwt.decode(id_token, KeySet.import_key_set(jwks), algorithms=list(ALGORITHMS))  # type: ignore[arg-type]
            jwt.JWTClaimsRegistry(
                leeway=LEEWAY,
                iss={"essential": True, "value": self.oidc.issuer},
                aud={"essential": True, "value": self.oidc.client_id},
                sub={"essential": True},
                exp={"essential": True},
                iat={"essential": True},
                nonce={"essential": True, "value": nonce},
            ).validate(decoded.claims)
        except (JoseError, ValueError, TypeError) as exc:
            raise Refused(f"the id_token is not valid: {exc}") from None
        claims = dict(decoded.claims)
        audience = claims["aud"]
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != self.oidc.client_id:
            raise Refused("the id_token is for several clients and not authorized for this one")
        return claims

    def _client(self, metadata: dict[str, Any]) -> AsyncOAuth2Client:
        from authlib.integrations.httpx_client import AsyncOAuth2Client

        methods = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        method = "client_secret_post" if "client_secret_basic" not in methods and "client_secret_post" in methods \
            else "client_secret_basic"
        return AsyncOAuth2Client(client_id=self.oidc.client_id, client_secret=self.oidc.client_secret,
                                 token_endpoint_auth_method=method, scope=SCOPE, redirect_uri=self.redirect_uri,
                                 code_challenge_method="S256", timeout=TIMEOUT)


async def _json(url: str) -> dict[str, Any]:
    try:
        async with httpx2.AsyncClient(timeout=TIMEOUT) as client:
            response = await client.get(url, headers={"Accept": "application/json"})
            response.raise_for_status()
            found = response.json()
    except (httpx2.HTTPError, ValueError) as exc:
        raise Unreachable(f"{url}: {exc}") from None
    if not isinstance(found, dict):
        raise Unreachable(f"{url}: not a JSON object")
    return found
