"""Single sign-on for the dashboard with OpenID Connect: the authorization code flow with PKCE (S256), `state`
and `nonce`, through Authlib's httpx client; the id_token checked with joserfc against the provider's JWKS.

- `flow.py`: the provider's metadata, the URL a browser is sent to, and the code exchanged for the checked
  claims of the id_token.
- `binding.py`: what a sign-on in progress keeps in the store (hashes only) and in the browser's cookie.
- `admins.py`: which identities are admins of the bot, and the name their session carries.
"""
