"""The `/admin` application: its pages, mounted on the gateway's aiohttp server by `mount`.

Pages are rendered on the server with Jinja2, styled and enhanced by the package's own static files;
nothing is fetched from elsewhere. Every change an admin makes is recorded in the store's audit
(`DashboardStore.record_dashboard_change`). Each page is a module in `pages/`; `PAGES` is the header's order.
"""

from __future__ import annotations

from aiohttp import web

from hermes_gateway.dashboard import views
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.guard import PREFIX, middlewares
from hermes_gateway.dashboard.oidc.flow import Provider
from hermes_gateway.dashboard.pages import (
    Page,
    approvals,
    audit,
    conversations,
    goals,
    jobs,
    kanban,
    learning,
    oidc,
    overview,
    people,
    signing,
    skills,
)
from hermes_gateway.dashboard.rendering import DASHBOARD, HERE, NAV, SOURCES, TEMPLATES, templates

PAGES: tuple[Page, ...] = (
    signing.PAGE,
    oidc.PAGE,
    overview.PAGE,
    people.PAGE,
    conversations.PAGE,
    skills.PAGE,
    learning.PAGE,
    goals.PAGE,
    kanban.PAGE,
    jobs.PAGE,
    approvals.PAGE,
    audit.PAGE,
)


def dashboard_app(sources: views.Sources, dashboard: Dashboard) -> web.Application:
    """The application to mount at `/admin` (see `mount`)."""
    app = web.Application(middlewares=middlewares(sources.store, dashboard))
    app[SOURCES], app[DASHBOARD], app[TEMPLATES] = sources, dashboard, templates()
    if dashboard.oidc is not None:
        app[oidc.PROVIDER] = Provider(dashboard.oidc, dashboard.oidc_callback_url)
    app[NAV] = tuple((page.label, page.path, page.name) for page in PAGES if page.label)
    for page in PAGES:
        page.routes(app.router)
    app.router.add_static("/static/", HERE / "static", show_index=False, follow_symlinks=False)
    return app


def mount(http: web.Application, sources: views.Sources, dashboard: Dashboard) -> web.Application:
    """Serve the dashboard under `/admin` on the gateway's HTTP server; returns the sub-application."""
    app = dashboard_app(sources, dashboard)
    http.add_subapp(PREFIX, app)
    return app
