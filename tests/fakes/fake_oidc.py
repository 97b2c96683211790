"""An OpenID Connect provider on 127.0.0.1: discovery, an authorization endpoint that sends the browser straight
back with a code for the scripted identity (or, with `consent`, shows a page whose link does), a token
endpoint, and its JWKS.

The token endpoint holds the client to what a real provider does: the client's secret (Basic or in the form),
the code once, the same `redirect_uri`, and a PKCE verifier whose S256 is the challenge the authorization
request carried; anything else is `invalid_grant`/`invalid_client`. Its id_tokens are signed RS256 with the
key the test made; `tamper` changes their claims after the fact, `sign_with` signs them with another key
under the same `kid` (a forgery) and `unsigned` sends them with `alg: none`.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import BasicAuth, web
from joserfc import jwt
from joserfc.jwk import RSAKey

from fakes.loopback import LoopbackServer


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    challenge: str
    nonce: str
    claims: dict[str, Any]


@dataclass
class FakeOidc(LoopbackServer):
    key: RSAKey
    client_id: str = "hermes-dashboard"
    client_secret: str = "dashboard-client-secret"
    identity: dict[str, Any] = field(default_factory=lambda: {"sub": "u-1", "email": "ada@example.com",
                                                              "email_verified": True})
    tamper: dict[str, Any] = field(default_factory=dict)
    sign_with: RSAKey | None = None
    unsigned: bool = False
    grants: dict[str, Grant] = field(default_factory=dict)
    authorize_requests: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    host: str = "127.0.0.1"  # the name it is reached by: "localhost" puts it on another site than 127.0.0.1
    consent: bool = False  # show a page whose "Allow" link goes back, as a provider asking the person does

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def issuer(self) -> str:
        return self.url

    def build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", self._discovery)
        app.router.add_get("/authorize", self._authorize)
        app.router.add_post("/token", self._token)
        app.router.add_get("/jwks", self._jwks)
        return app

    async def _discovery(self, request: web.Request) -> web.Response:
        return web.json_response({
            "issuer": self.issuer, "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token", "jwks_uri": f"{self.url}/jwks",
            "response_types_supported": ["code"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"], "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        })

    async def _jwks(self, request: web.Request) -> web.Response:
        return web.json_response({"keys": [self.key.as_dict(private=False)]})

    async def _authorize(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.authorize_requests.append(query)
        if (query.get("response_type") != "code" or query.get("client_id") != self.client_id
                or query.get("code_challenge_method") != "S256" or not query.get("code_challenge")
                or "openid" not in query.get("scope", "").split()):
            return web.Response(status=400, text="bad authorization request")
        code = secrets.token_urlsafe(16)
        self.grants[code] = Grant(self.client_id, query.get("redirect_uri", ""), query["code_challenge"],
                                  query.get("nonce", ""), dict(self.identity))
        back = f"{query.get('redirect_uri', '')}?{urlencode({'code': code, 'state': query.get('state', '')})}"
        if self.consent:  # the way back is then a navigation this site starts
            return web.Response(text=f'<!doctype html><title>Consent</title><a id="allow" href="{html.escape(back)}">'
                                     "Allow</a>", content_type="text/html")
        raise web.HTTPFound(back)

    async def _token(self, request: web.Request) -> web.Response:
        form = {key: str(value) for key, value in (await request.post()).items()}
        self.token_requests.append(form)
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        if "Authorization" in request.headers:
            basic = BasicAuth.decode(request.headers["Authorization"])
            client_id, secret = basic.login, basic.password
        if (client_id, secret) != (self.client_id, self.client_secret):
            return web.json_response({"error": "invalid_client"}, status=401)
        grant = self.grants.pop(form.get("code", ""), None)
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if (grant is None or form.get("grant_type") != "authorization_code" or grant.client_id != client_id
                or grant.redirect_uri != form.get("redirect_uri") or not verifier or challenge != grant.challenge):
            return web.json_response({"error": "invalid_grant"}, status=400)
        return web.json_response({"access_token": secrets.token_urlsafe(16), "token_type": "Bearer",
                                  "expires_in": 3600, "id_token": self.id_token(grant)})

    def id_token(self, grant: Grant) -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": grant.client_id, "iat": now, "exp": now + 300, "nonce": grant.nonce,
                  **grant.claims, **self.tamper}
        if self.unsigned:
            header = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
            return f"{header}.{_b64(json.dumps(claims).encode())}."
        key = self.sign_with or self.key
        return jwt.encode({"alg": "RS256", "kid": self.key.kid}, claims, key)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def new_key() -> RSAKey:
    """An RS256 signing key with a `kid` (as providers' keys have)."""
    key = RSAKey.generate_key(2048, parameters={"use": "sig", "alg": "RS256"})
    key.ensure_kid()
    return key
