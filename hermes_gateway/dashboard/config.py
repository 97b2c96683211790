"""Where the dashboard is reached and how long its links and sessions last.

`HERMES_PUBLIC_URL` is the gateway's address as a browser reaches it (e.g. `https://bot.example.com`, behind
the TLS proxy); links point there, only requests whose `Host` is its host are served (against DNS
rebinding), and cookies are `Secure` when it is https. Unset, it is `http://HERMES_HTTP_HOST:HERMES_HTTP_PORT`
(`127.0.0.1` for a host that listens everywhere), which only a browser on the server itself reaches.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from hermes_engine.config import Settings
from hermes_engine.errors import ConfigError


class DashboardSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HERMES_", extra="ignore")

    public_url: str | None = None
    dashboard_link_minutes: float = Field(10.0, gt=0, le=60)  # a sign-in link is used once, within this
    dashboard_session_hours: float = Field(12.0, gt=0, le=24 * 7)


@dataclass(frozen=True)
class Dashboard:
    """The dashboard's settings as the code uses them."""

    public_url: str  # without a trailing slash
    link_seconds: float
    session_seconds: float

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

    @classmethod
    def from_settings(cls, settings: Settings, own: DashboardSettings | None = None) -> Dashboard:
        own = own or DashboardSettings()
        host = "127.0.0.1" if settings.http_host in ("", "0.0.0.0", "::") else settings.http_host
        host = f"[{host}]" if ":" in host else host
        url = (own.public_url or f"http://{host}:{settings.http_port}").rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise ConfigError(f"HERMES_PUBLIC_URL must be http(s)://host[:port] with no path, not {url!r}")
        return cls(url, own.dashboard_link_minutes * 60, own.dashboard_session_hours * 3600)
