"""The security scan's allowances as data: the known false positives, each cleared by a precise row.

- `SERVICES`: a service's own key sent to the hosts that service documents is how its API is called (and
  any key may go to this machine or the local network). The rules that may be cleared this way say so
  (`Rule.services` in `scan_rules`).
- `FORMATTERS`: an interpreter reading a download as data, not as its program (`curl … | python3 -m
  json.tool`); the `pipe_to_shell` rule excludes them.

Every row carries an `example` that its rules would flag without it (a test per row).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Service:
    """A service's own key (by variable name) sent to the hosts it documents is how its API is called."""

    name: str
    variables: str  # regex over the variable name (without `$`)
    hosts: tuple[str, ...]  # a host matches itself and its subdomains
    example: str  # a text the service rules would flag without this row


SERVICES: tuple[Service, ...] = (
    Service("GitHub", r"(?:GITHUB|GH)_\w*", ("github.com", "githubusercontent.com", "ghcr.io"),
            'curl -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com/user/repos'),
    Service("GitLab", r"(?:GITLAB|GL|CI_JOB)_\w*", ("gitlab.com",),
            'curl --header "PRIVATE-TOKEN: $GITLAB_TOKEN" https://gitlab.com/api/v4/projects'),
    Service("Airtable", r"AIRTABLE_\w*", ("airtable.com",),
            'curl "https://api.airtable.com/v0/$BASE/Tasks" -H "Authorization: Bearer $AIRTABLE_API_KEY"'),
    Service("Tenor", r"TENOR_\w*", ("tenor.googleapis.com", "tenor.com"),
            'curl "https://tenor.googleapis.com/v2/search?q=cat&key=$TENOR_API_KEY&limit=1"'),
    Service("Google", r"(?:GOOGLE|GEMINI|GCP|YOUTUBE|MAPS)_\w*",
            ("generativelanguage.googleapis.com", "www.googleapis.com", "youtube.googleapis.com",
             "maps.googleapis.com", "customsearch.googleapis.com", "translation.googleapis.com",
             "sheets.googleapis.com", "gmail.googleapis.com", "aiplatform.googleapis.com"),
            'curl "https://generativelanguage.googleapis.com/v1beta/models?key=$GEMINI_API_KEY"'),
    Service("OpenAI", r"OPENAI_\w*", ("openai.com",),
            'curl https://api.openai.com/v1/models -H "Authorization: Bearer $OPENAI_API_KEY"'),
    Service("Anthropic", r"(?:ANTHROPIC|CLAUDE)_\w*", ("anthropic.com",),
            'curl https://api.anthropic.com/v1/messages -H "x-api-key: $ANTHROPIC_API_KEY"'),
    Service("OpenRouter", r"OPENROUTER_\w*", ("openrouter.ai",),
            'curl https://openrouter.ai/api/v1/models -H "Authorization: Bearer $OPENROUTER_API_KEY"'),
    Service("Hugging Face", r"(?:HF|HUGGING_?FACE(?:_HUB)?)_\w*", ("huggingface.co", "hf.co"),
            'curl -H "Authorization: Bearer $HF_TOKEN" https://huggingface.co/api/whoami-v2'),
    Service("Slack", r"SLACK_\w*", ("slack.com",),
            'curl -H "Authorization: Bearer $SLACK_BOT_TOKEN" https://slack.com/api/auth.test'),
    Service("Telegram", r"(?:TELEGRAM|TG)_\w*", ("api.telegram.org",),
            'curl "https://api.telegram.org/bot$TELEGRAM_BOT_TOKEN/getMe"'),
    Service("Discord", r"DISCORD_\w*", ("discord.com", "discordapp.com"),
            'curl -H "Authorization: Bot $DISCORD_BOT_TOKEN" https://discord.com/api/v10/users/@me'),
    Service("Notion", r"NOTION_\w*", ("notion.com", "notion.so"),
            'curl https://api.notion.com/v1/users -H "Authorization: Bearer $NOTION_API_KEY"'),
    Service("Linear", r"LINEAR_\w*", ("linear.app",),
            "requests.post('https://api.linear.app/graphql', headers={'Authorization': os.environ['LINEAR_API_KEY']})"),
    Service("Todoist", r"TODOIST_\w*", ("todoist.com",),
            'curl https://api.todoist.com/rest/v2/tasks -H "Authorization: Bearer $TODOIST_API_TOKEN"'),
    Service("Trello", r"TRELLO_\w*", ("trello.com",),
            'curl "https://api.trello.com/1/members/me/boards?key=$TRELLO_KEY&token=$TRELLO_TOKEN"'),
    Service("Atlassian", r"(?:JIRA|ATLASSIAN|CONFLUENCE)_\w*", ("atlassian.net", "atlassian.com"),
            'curl -u "me@example.com:$JIRA_API_TOKEN" https://acme.atlassian.net/rest/api/3/myself'),
    Service("Stripe", r"STRIPE_\w*", ("stripe.com",),
            'curl https://api.stripe.com/v1/charges -u "$STRIPE_SECRET_KEY:"'),
    Service("Twilio", r"TWILIO_\w*", ("twilio.com",),
            'curl https://api.twilio.com/2010-04-01/Accounts.json -u "$TWILIO_SID:$TWILIO_AUTH_TOKEN"'),
    Service("SendGrid", r"SENDGRID_\w*", ("sendgrid.com",),
            'curl https://api.sendgrid.com/v3/scopes -H "Authorization: Bearer $SENDGRID_API_KEY"'),
    Service("ElevenLabs", r"(?:ELEVENLABS|XI)_\w*", ("elevenlabs.io",),
            'curl https://api.elevenlabs.io/v1/voices -H "xi-api-key: $ELEVENLABS_API_KEY"'),
    Service("Replicate", r"REPLICATE_\w*", ("replicate.com",),
            'curl https://api.replicate.com/v1/models -H "Authorization: Bearer $REPLICATE_API_TOKEN"'),
    Service("Groq", r"GROQ_\w*", ("groq.com",),
            'curl https://api.groq.com/openai/v1/models -H "Authorization: Bearer $GROQ_API_KEY"'),
    Service("Mistral", r"MISTRAL_\w*", ("mistral.ai",),
            'curl https://api.mistral.ai/v1/models -H "Authorization: Bearer $MISTRAL_API_KEY"'),
    Service("Brave Search", r"BRAVE_\w*", ("search.brave.com",),
            'curl "https://api.search.brave.com/res/v1/web/search?q=x" -H "X-Subscription-Token: $BRAVE_API_KEY"'),
    Service("Tavily", r"TAVILY_\w*", ("tavily.com",),
            'curl https://api.tavily.com/search -d "{\\"api_key\\": \\"$TAVILY_API_KEY\\", \\"query\\": \\"x\\"}"'),
    Service("Cloudflare", r"(?:CLOUDFLARE|CF)_\w*", ("cloudflare.com",),
            'curl https://api.cloudflare.com/client/v4/user/tokens/verify -H "Authorization: Bearer $CF_API_TOKEN"'),
    Service("Datadog", r"(?:DD|DATADOG)_\w*", ("datadoghq.com", "datadoghq.eu"),
            'curl https://api.datadoghq.com/api/v1/validate -H "DD-API-KEY: $DD_API_KEY"'),
    Service("npm", r"NPM_\w*", ("npmjs.org", "npmjs.com"),
            'curl -H "Authorization: Bearer $NPM_TOKEN" https://registry.npmjs.org/-/whoami'),
    Service("PyPI", r"(?:PYPI|TWINE)_\w*", ("pypi.org",),
            'curl -u "__token__:$PYPI_TOKEN" https://upload.pypi.org/legacy/ -F content=@dist/pkg.whl'),
    Service("Docker Hub", r"(?:DOCKER|DOCKERHUB)_\w*", ("docker.io", "docker.com"),
            'curl -s -H "Authorization: Bearer $DOCKERHUB_TOKEN" https://hub.docker.com/v2/repositories/me/'),
    # Private names and addresses (an entry ending in "." is an address prefix): the key stays in the network.
    Service("the local network", r"\w+", ("internal", "local", "lan", "home.arpa", "localdomain", "10.", "192.168.",
                                          *(f"172.{n}." for n in range(16, 32))),
            'curl -s -u "admin:$GRAFANA_PASSWORD" http://grafana.internal:3000/api/health'),
    # The machine itself: a key sent to a local service never leaves it.
    Service("this machine", r"\w+", ("localhost", "127.0.0.1", "[::1]", "0.0.0.0"),
            'curl -s http://localhost:8080/api/items -H "X-Api-Key: $LOCAL_API_KEY"'),
)


@dataclass(frozen=True)
class Formatter:
    """An interpreter reading a download as data (not as its program): `curl … | python3 -m json.tool`."""

    name: str
    pattern: str  # what follows the pipe
    example: str


FORMATTERS: tuple[Formatter, ...] = (
    Formatter("python -m json.tool", r"python[\d.]*\s+-m\s+json\.tool\b",
              "curl -s https://api.example.com/v1/items | python3 -m json.tool"),
    Formatter("python -c", r"python[\d.]*\s+-c\s",
              "curl -s https://api.example.com/v1/items | python3 -c 'import json,sys; print(json.load(sys.stdin))'"),
    Formatter("node -e / -p", r"node\s+-[ep]\s",
              "curl -s https://api.example.com/v1/items | node -p 'process.version'"),
    Formatter("perl -ne / -pe", r"perl\s+-\w*[np]\w*e\s",
              "wget -qO- https://example.com/feed.xml | perl -ne 'print if /title/'"),
    Formatter("ruby -e", r"ruby\s+-e\s",
              "curl -s https://example.com/data.json | ruby -e 'require \"json\"; p JSON.parse(STDIN.read)'"),
)

# What may follow a pipe from a download without it being run as a program (`pipe_to_shell`).
NOT_FORMATTER = "|".join(f"(?:{f.pattern})" for f in FORMATTERS)


__all__ = ["FORMATTERS", "Formatter", "NOT_FORMATTER", "SERVICES", "Service"]
