"""Where the dashboard is reached and how long its links and sessions last.

`HERMES_PUBLIC_URL` is the gateway's address as a browser reaches it (e.g. `https://bot.example.com`, behind
the TLS proxy); links point there, only requests whose `Host` is its host are served (against DNS
rebinding), and cookies are `Secure` when it is https. Unset, it is `http://HERMES_HTTP_HOST:HERMES_HTTP_PORT`
(`127.0.0.1` for a host that listens everywhere), which only a browser on the server itself reaches.

Single sign-on (OpenID Connect) is off unless `HERMES_DASHBOARD_OIDC_ISSUER` is set, and then needs the
client's id and secret; `HERMES_DASHBOARD_OIDC_ADMINS` lists the e-mail addresses that sign in as admins
(with Sign in with Slack, the Slack admins of the bot profiles also do, see `oidc/admins.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from hermes_engine.config import Settings
from hermes_engine.errors import ConfigError


class DashboardSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HERMES_", extra="ignore")

    public_url: str | None = None
    dashboard_link_minutes: float = Field(10.0, gt=0, le=60)  # a sign-in link is used once, within this
    dashboard_session_hours: float = Field(12.0, gt=0, le=24 * 7)
    dashboard_oidc_issuer: str | None = None  # discovery at <issuer>/.well-known/openid-configuration
    dashboard_oidc_client_id: str | None = None
    dashboard_oidc_client_secret: SecretStr | None = None
    dashboard_oidc_admins: str = ""  # e-mail addresses, comma-separated


@dataclass(frozen=True)
class Oidc:
    """Single sign-on: the provider (its issuer, exactly as its id_tokens name it), this client, and the
    e-mail addresses (lower case) that are admins."""

    issuer: str
    client_id: str
    client_secret: str
    admins: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, own: DashboardSettings) -> Oidc | None:
        if not own.dashboard_oidc_issuer:
            return None
        issuer = own.dashboard_oidc_issuer.rstrip("/")
        parts = urlsplit(issuer)
        loopback = parts.hostname in ("127.0.0.1", "::1", "localhost")
        if not parts.hostname or not (parts.scheme == "https" or (parts.scheme == "http" and loopback)):
            raise ConfigError(f"HERMES_DASHBOARD_OIDC_ISSUER must be an https URL, not {issuer!r}")
        secret = own.dashboard_oidc_client_secret.get_secret_value() if own.dashboard_oidc_client_secret else ""
        if not own.dashboard_oidc_client_id or not secret:
            raise ConfigError("HERMES_DASHBOARD_OIDC_ISSUER needs HERMES_DASHBOARD_OIDC_CLIENT_ID and "
                              "HERMES_DASHBOARD_OIDC_CLIENT_SECRET too")
        admins = frozenset(a.strip().lower() for a in own.dashboard_oidc_admins.split(",") if a.strip())
        return cls(issuer, own.dashboard_oidc_client_id, secret, admins)


@dataclass(frozen=True)
class Dashboard:
    """The dashboard's settings as the code uses them."""

    public_url: str  # without a trailing slash
    link_seconds: float
    session_seconds: float
    oidc: Oidc | None = None  # single sign-on, when configured

    @property
    def host(self) -> str:
        """The `Host` header requests must carry (host, and port when the URL names one other than its
        scheme's default, which browsers leave out)."""
        return self.normal_host(urlsplit(self.public_url).netloc)

    def normal_host(self, host: str) -> str:
        default = ":443" if self.secure else ":80"
        return host.lower().removesuffix(default)

    @property
    def origin(self) -> str:
        parts = urlsplit(self.public_url)
        return f"{parts.scheme}://{parts.netloc}".lower()

    @property
    def secure(self) -> bool:
        return urlsplit(self.public_url).scheme == "https"

    def login_url(self, token: str) -> str:
        return f"{self.public_url}/admin/login?token={token}"

    @property
    def oidc_callback_url(self) -> str:
        """Where the provider sends the browser back (registered with the provider as the redirect URI)."""
        return f"{self.public_url}/admin/oidc/callback"

    @classmethod
    def from_settings(cls, settings: Settings, own: DashboardSettings | None = None) -> Dashboard:
        own = own or DashboardSettings()
        host = "127.0.0.1" if settings.http_host in ("", "0.0.0.0", "::") else settings.http_host
        host = f"[{host}]" if ":" in host else host
        url = (own.public_url or f"http://{host}:{settings.http_port}").rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise ConfigError(f"HERMES_PUBLIC_URL must be http(s)://host[:port] with no path, not {url!r}")
        return cls(url, own.dashboard_link_minutes * 60, own.dashboard_session_hours * 3600, Oidc.from_settings(own))
