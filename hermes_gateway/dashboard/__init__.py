"""The web dashboard for the people who run the bot, served under `/admin` on the gateway's HTTP server.

Signed in through the chat platform (`/dashboard` from an admin in a DM, or `hermes-gateway dashboard link`
on the server): a one-time link opens a session kept in the database, so every replica honours it. Every
page reads and changes state through the engine's ports (`Store`, `MemoryBook`), never SQL.

- `config.py`: the gateway's public URL and how long links and sessions last.
- `tokens.py`: link and session tokens, their hashes and the CSRF token of a session.
- `links.py`: making a sign-in link (the chat command and the CLI share it).
- `oidc/`: single sign-on with an OpenID Connect provider, when configured (`pages/oidc.py`: its two routes).
- `guard.py`: the middlewares every route passes through (Host check, security headers, the session).
- `app.py`: the routes; `views.py`: what each page shows, gathered from the ports.
- `command.py`: the `/dashboard` chat command; `serving.py`: both put into a running gateway.
"""
