"""Check everything under deploy/ without a network, a cluster or a Docker daemon.

- Kubernetes: every object is validated against the schema of its kind (kubernetes-validate's bundled
  schemas, strict: an unknown field is an error), and every object it refers to exists: a pod's volume
  claim, Secret and ConfigMap (in the manifests, or created by a `kubectl create secret|configmap` command
  in deploy/README.md), a Service's selector and target port, a Deployment's selector.
- Compose: the compose-spec JSON schema (bundled with check-jsonschema), then what the schema cannot see:
  build contexts and Dockerfiles, env files (or their `.example` to copy), named volumes, depends_on.
- Dockerfile: every path it copies exists, and every package the project installs is copied.
- The `.env.example` to copy holds only `NAME=value` lines that compose, kubectl and systemd read alike.
- Every `--bot PROFILE` that a deploy file starts names a folder of the repository.
- Nothing runs the gateway as root: the Dockerfile ends on a numeric non-root `USER` (so Kubernetes can
  check it), each compose gateway sets `user:`, each pod says `runAsNonRoot` with a non-root `runAsUser`,
  the systemd unit has a non-root `User=`.
- Replicas: the Deployment runs at least two, a PodDisruptionBudget selecting its pods keeps one; the
  compose file runs at least two gateway services and a reverse proxy (its Caddyfile) that routes to each of
  them at its HTTP port.

Usage: python .ci/validate_deploy.py [REPO_ROOT]   (exit 1 and one line per problem when anything is wrong)
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

MIN_REPLICAS = 2
GATEWAY_PORT = "8080"  # HERMES_HTTP_PORT in the Dockerfile
KUBERNETES_VERSION = "1.30"  # the oldest version the manifests promise to work on
# The public paths: Slack's events (SlackOptions.events_path) and the Telegram webhook (/telegram/<bot>).
WEBHOOK_PATHS = {"/slack/events", "/telegram/*"}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"}


# ----------------------------------------------------------------------------------------- kubernetes

def load_manifests(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """(file name, object) for every object of every YAML file in `folder` and its subfolders."""
    objects = []
    for path in sorted([*folder.rglob("*.yaml"), *folder.rglob("*.yml")]):
        for obj in yaml.safe_load_all(path.read_text()):
            if obj:
                objects.append((str(path.relative_to(folder)), obj))
    return objects


def schema_problems(objects: list[tuple[str, dict[str, Any]]]) -> list[str]:
    problems = []
    for file, obj in objects:
        name = f"{file}: {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path) or "(top)"
            problems.append(f"{name}: {where}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{name}: {exc.message}")
    return problems


def documented_objects(readme: Path) -> set[tuple[str, str]]:
    """(kind, name) of the Secrets and ConfigMaps that a `kubectl create` command in the README creates."""
    text = readme.read_text() if readme.exists() else ""
    found = set()
    for what, name in re.findall(r"kubectl create (secret generic|configmap) ([a-z0-9][a-z0-9.-]*)", text):
        found.add(("Secret" if what.startswith("secret") else "ConfigMap", name))
    return found


def pod_template(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod":
        return obj
    if obj.get("kind") == "CronJob":
        return ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
    return spec.get("template")


def _pod_references(pod_spec: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """(kind, name, optional) of every object a pod spec refers to."""
    for volume in pod_spec.get("volumes") or []:
        if "persistentVolumeClaim" in volume:
            yield "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"], False
        if "secret" in volume:
            yield "Secret", volume["secret"]["secretName"], bool(volume["secret"].get("optional"))
        if "configMap" in volume:
            yield "ConfigMap", volume["configMap"]["name"], bool(volume["configMap"].get("optional"))
    containers = [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]
    for container in containers:
        for source in container.get("envFrom") or []:
            for key, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
                if key in source:
                    yield kind, source[key]["name"], bool(source[key].get("optional"))
        for env in container.get("env") or []:
            value_from = env.get("valueFrom") or {}
            for key, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                if key in value_from:
                    yield kind, value_from[key]["name"], bool(value_from[key].get("optional"))


def reference_problems(objects: list[tuple[str, dict[str, Any]]], documented: set[tuple[str, str]]) -> list[str]:
    """Every object a manifest refers to is defined, and every selector selects something."""
    defined = {(obj["kind"], obj["metadata"]["name"]) for _, obj in objects} | documented
    problems = []
    pods: list[tuple[dict[str, str], dict[str, Any]]] = []  # (labels, pod spec) of every workload
    for file, obj in objects:
        template = pod_template(obj) if obj.get("kind") in WORKLOAD_KINDS else None
        if template is None:
            continue
        name = f"{file}: {obj['kind']}/{obj['metadata']['name']}"
        labels = (template.get("metadata") or {}).get("labels") or {}
        pod_spec = template.get("spec") or {}
        pods.append((labels, pod_spec))
        for kind, ref, optional in _pod_references(pod_spec):
            if (kind, ref) not in defined and not optional:
                problems.append(f"{name} refers to {kind} '{ref}', which no manifest defines "
                                f"(nor a `kubectl create` command in deploy/README.md)")
        claim_templates = (obj.get("spec") or {}).get("volumeClaimTemplates") or []  # a StatefulSet's own claims
        volumes = {v["name"] for v in [*(pod_spec.get("volumes") or []), *(c["metadata"] for c in claim_templates)]}
        for container in pod_spec.get("containers") or []:
            for mount in container.get("volumeMounts") or []:
                if mount["name"] not in volumes:
                    problems.append(f"{name}: container {container['name']} mounts volume '{mount['name']}', "
                                    "which the pod does not declare")
        match = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels")
        if match is not None and not _selects(match, labels):
            problems.append(f"{name}: selector {match} does not match its pod labels {labels}")
    for file, obj in objects:
        if obj.get("kind") != "Service" or not (obj.get("spec") or {}).get("selector"):
            continue
        name = f"{file}: Service/{obj['metadata']['name']}"
        selector = obj["spec"]["selector"]
        selected = [spec for labels, spec in pods if _selects(selector, labels)]
        if not selected:
            problems.append(f"{name}: selector {selector} matches no workload's pod labels")
            continue
        ports = [p for spec in selected for c in spec.get("containers") or [] for p in c.get("ports") or []]
        for port in obj["spec"].get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            if not any(target in (p.get("containerPort"), p.get("name")) for p in ports):
                problems.append(f"{name}: targetPort {target} is no container port of the pods it selects")
    return problems


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def replica_problems(objects: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Each Deployment runs at least two replicas, and a PodDisruptionBudget that selects its pods keeps
    at least one and fewer than all of them available (a drain can proceed, one replica always serves)."""
    problems = []
    budgets = [(file, obj) for file, obj in objects if obj.get("kind") == "PodDisruptionBudget"]
    covered = set()
    for file, obj in objects:
        if obj.get("kind") != "Deployment":
            continue
        name = f"{file}: Deployment/{obj['metadata']['name']}"
        replicas = (obj.get("spec") or {}).get("replicas", 1)
        if replicas < MIN_REPLICAS:
            problems.append(f"{name} runs {replicas} replica(s); the gateway is deployed as {MIN_REPLICAS} or more")
        labels = ((pod_template(obj) or {}).get("metadata") or {}).get("labels") or {}
        selecting = [(f, b) for f, b in budgets
                     if _selects(((b.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}, labels)]
        if not selecting:
            problems.append(f"{name}: no PodDisruptionBudget selects its pods {labels}")
        for budget_file, budget in selecting:
            covered.add((budget_file, budget["metadata"]["name"]))
            keep = (budget.get("spec") or {}).get("minAvailable")
            if not isinstance(keep, int) or not 1 <= keep < replicas:
                problems.append(f"{budget_file}: PodDisruptionBudget/{budget['metadata']['name']}: minAvailable "
                                f"{keep} should be at least 1 and below the {replicas} replicas it guards")
    for file, budget in budgets:
        if (file, budget["metadata"]["name"]) not in covered:
            problems.append(f"{file}: PodDisruptionBudget/{budget['metadata']['name']} selects no Deployment's pods")
    return problems


# ----------------------------------------------------------------------------------------- compose

def compose_problems(compose_file: Path) -> list[str]:
    compose = yaml.safe_load(compose_file.read_text())
    schema_text = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json")
    schema = json.loads(schema_text.read_text())
    problems = [f"{compose_file.name}: {'.'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
                for e in jsonschema.Draft202012Validator(schema).iter_errors(compose)]
    if problems:
        return problems
    here = compose_file.parent
    services = compose.get("services") or {}
    declared_volumes = set(compose.get("volumes") or {})
    for name, service in services.items():
        where = f"{compose_file.name}: service {name}"
        if "image" not in service and "build" not in service:
            problems.append(f"{where} has neither an image nor a build")
        build = service.get("build")
        if build is not None:
            context = here / (build if isinstance(build, str) else build.get("context", "."))
            dockerfile = context / ("Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile"))
            if not dockerfile.is_file():
                problems.append(f"{where}: build finds no Dockerfile at {dockerfile}")
        env_files = service.get("env_file") or []
        for entry in [env_files] if isinstance(env_files, str | dict) else env_files:
            path = here / (entry if isinstance(entry, str) else entry["path"])
            optional = isinstance(entry, dict) and entry.get("required") is False
            if not optional and not path.exists() and not path.with_name(path.name + ".example").exists():
                problems.append(f"{where}: env_file {path.name} exists nowhere, nor {path.name}.example to copy")
        for volume in service.get("volumes") or []:
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source and not source.startswith((".", "/", "~")) and source not in declared_volumes:
                problems.append(f"{where}: volume '{source}' is not declared under top-level volumes")
        for dependency in service.get("depends_on") or []:
            if dependency not in services:
                problems.append(f"{where}: depends_on names no service '{dependency}'")
    return problems


def _gateway_port(service: dict[str, Any]) -> str:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment if "=" in item)
    return str(environment.get("HERMES_HTTP_PORT") or GATEWAY_PORT)


def proxy_problems(compose_file: Path) -> list[str]:
    """At least two gateway services (each runs `run`, or one runs `deploy.replicas` copies), and a proxy
    service mounting a Caddyfile whose `reverse_proxy` spreads requests over every one of them, each at
    the gateway's HTTP port, and names no other upstream."""
    compose = yaml.safe_load(compose_file.read_text())
    services = compose.get("services") or {}
    gateways = {name: svc for name, svc in services.items() if (svc.get("command") or [None])[0] == "run"}
    count = sum(int((svc.get("deploy") or {}).get("replicas", 1)) for svc in gateways.values())
    where = compose_file.name
    problems = []
    if count < MIN_REPLICAS:
        problems.append(f"{where}: {count} gateway replica(s); run {MIN_REPLICAS} or more")
    caddyfiles = [compose_file.parent / volume.split(":")[0] for svc in services.values()
                  for volume in svc.get("volumes") or [] if isinstance(volume, str) and "Caddyfile" in volume]
    if not caddyfiles:
        return [*problems, f"{where}: no reverse proxy (a service mounting a Caddyfile) in front of the gateways"]
    for caddyfile in caddyfiles:
        if not caddyfile.is_file():
            problems.append(f"{where}: the proxy mounts {caddyfile.name}, which does not exist")
            continue
        routes = [line.split("{")[0].split()[1:] for line in caddyfile.read_text().splitlines()
                  if line.strip().startswith("reverse_proxy")]
        for upstreams in routes:
            for upstream in upstreams:
                host, _, port = upstream.removeprefix("http://").partition(":")
                if host not in gateways:
                    problems.append(f"{caddyfile.name}: reverse_proxy to {upstream}, which is no gateway service")
                elif port != _gateway_port(gateways[host]):
                    problems.append(f"{caddyfile.name}: reverse_proxy to {upstream}, but {host} serves HTTP on "
                                    f"port {_gateway_port(gateways[host])}")
        hosts = [{u.removeprefix("http://").partition(":")[0] for u in upstreams} for upstreams in routes]
        if set(gateways) not in hosts:
            problems.append(f"{caddyfile.name}: no reverse_proxy spreads requests over every gateway service "
                            f"({', '.join(sorted(gateways))})")
    return problems


def caddy_sites(caddyfile: str) -> dict[str, set[str]]:
    """Site address -> the request paths it proxies to a gateway (`*`: every path). A `reverse_proxy` in
    a `handle @matcher` (or `reverse_proxy @matcher`) proxies that matcher's `path`s; anywhere else, all."""
    sites: dict[str, set[str]] = {}
    matchers: dict[str, list[str]] = {}
    site, handles = "", []  # handles: the matcher of each open block inside the site ("" for none)
    for raw in caddyfile.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.rstrip("{").split()
        if not handles and line.endswith("{"):
            site = words[0] if words else ""
            handles.append("")
            continue
        if line == "}":
            handles.pop()
            continue
        if words[:1] and words[0].startswith("@") and words[1:2] == ["path"]:
            matchers[words[0]] = words[2:]
        matcher = next((w for w in words[1:2] if w.startswith("@")), "")
        if words[0] == "reverse_proxy" and site != "":
            scope = matcher or next((h for h in reversed(handles) if h), "")
            sites.setdefault(site, set()).update(matchers.get(scope, ["*"]) if scope else ["*"])
        if line.endswith("{"):
            handles.append(matcher if words[0] in ("handle", "route") else "")
    return sites


def _published(port: object) -> tuple[str, str]:
    """(host address, container port) of a compose `ports:` entry; address "" means every interface."""
    if isinstance(port, dict):
        return str(port.get("host_ip", "")), str(port.get("target", ""))
    parts = str(port).rsplit(":", 2)
    address = parts[0] if len(parts) == 3 else ""
    return address.strip("[]"), parts[-1].split("/")[0]


def exposure_problems(compose_file: Path) -> list[str]:
    """Only the webhooks are public. Every published port binds 127.0.0.1 but the proxy's webhook entry,
    which proxies exactly WEBHOOK_PATHS; /health, /ready, /metrics and /admin stay on the loopback ports."""
    compose = yaml.safe_load(compose_file.read_text())
    problems = []
    for name, service in (compose.get("services") or {}).items():
        caddyfiles = [compose_file.parent / v.split(":")[0] for v in service.get("volumes") or []
                      if isinstance(v, str) and "Caddyfile" in v]
        sites = caddy_sites(caddyfiles[0].read_text()) if caddyfiles and caddyfiles[0].is_file() else {}
        for port in service.get("ports") or []:
            address, target = _published(port)
            if address in ("127.0.0.1", "::1", "localhost"):
                continue
            paths = sites.get(f":{target}")
            if paths is None:
                problems.append(f"{compose_file.name}: service {name} publishes {port} on every interface; "
                                "bind it to 127.0.0.1 (only the proxy's webhook entry is public)")
            elif paths != WEBHOOK_PATHS:
                problems.append(f"{compose_file.name}: service {name} publishes {port} on every interface, where "
                                f"the proxy passes {sorted(paths)}; it must pass the webhooks alone "
                                f"({sorted(WEBHOOK_PATHS)}), or bind 127.0.0.1")
    return problems


# ----------------------------------------------------------------------------------------- Dockerfile

def dockerfile_problems(dockerfile: Path, root: Path) -> list[str]:
    """The Dockerfile is built with the repository root as context: what it copies exists there, and the
    packages the project installs are all copied (a missing one installs fine and fails at start)."""
    problems, copied = [], set()
    for line in dockerfile.read_text().splitlines():
        parts = line.split()
        if not parts or parts[0].upper() != "COPY" or any(p.startswith("--from") for p in parts):
            continue
        for source in [p for p in parts[1:-1] if not p.startswith("--")]:
            copied.add(source.rstrip("/"))
            if not (root / source).exists():
                problems.append(f"{dockerfile.name}: COPY {source}: no such path in the repository root")
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        if package not in copied:
            problems.append(f"{dockerfile.name}: the package {package} is installed but never copied")
    return problems


def parse_env_file(text: str) -> list[tuple[int, str, str]]:
    """(line number, name, value) as Docker's `--env-file` and `kubectl create secret --from-env-file` read
    a file: leading blanks dropped, comment lines skipped, the value everything after the first `=`, kept as
    it is (neither strips quotes nor a trailing `# comment`). A line without `=` gets the name alone."""
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip()
        if not line or line.startswith("#"):
            continue
        name, _, value = line.partition("=")
        entries.append((number, name, value))
    return entries


def uncommented(text: str) -> str:
    """The file with every commented-out `NAME=value` line uncommented, as an operator filling it in would."""
    lines = []
    for line in text.splitlines():
        body = line.lstrip().lstrip("#").lstrip()
        lines.append(body if line.lstrip().startswith("#") and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", body) else line)
    return "\n".join(lines)


def env_file_problems(env_file: Path) -> list[str]:
    """The env file template is read by compose, `kubectl create secret --from-env-file` and systemd alike,
    each keeping the value as written: every line, uncommented, is `NAME=value` with a clean value (no
    blank, no `#`, no quote, which would become part of a token). A line left uncommented carries a value:
    an empty `NAME=` would count as set (a platform token set to nothing)."""
    problems = []
    text = env_file.read_text()
    for number, name, value in parse_env_file(text):
        if not value:
            problems.append(f"{env_file.name}:{number}: {name}= is empty but set; comment it out to leave it unset")
    for number, name, value in parse_env_file(uncommented(text)):
        where = f"{env_file.name}:{number}"
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name == "export":
            problems.append(f"{where}: not a NAME=value line: {name}")
        elif re.search(r"[\s#'\"]", value):
            problems.append(f"{where}: the value of {name} holds a blank, '#' or a quote, which compose and kubectl "
                            f"keep as part of it: {value!r}")
    return problems


# ----------------------------------------------------------------------------------------- bot profiles

def bot_problems(deploy: Path, root: Path) -> list[str]:
    """Every `--bot X` (in a command line or an args/command list) names a bot profile folder."""
    problems = []
    for path in sorted(p for p in deploy.rglob("*") if p.is_file() and not p.name.endswith(".md")):
        text = path.read_text()
        for bot in re.findall(r"--bot[\"']?\s*[,=]?\s*[\"']?([\w./-]+)", text):
            if not (root / bot / "profile.yaml").is_file():
                problems.append(f"{path.relative_to(deploy)}: --bot {bot}: no bot profile at {bot}/profile.yaml")
    return problems


# ----------------------------------------------------------------------------------------- users

def _non_root_id(value: object) -> bool:
    """A numeric uid (with an optional `:gid`) other than 0: what Kubernetes can verify is not root."""
    uid, _, gid = str(value).partition(":")
    return uid.isdigit() and int(uid) != 0 and (not gid or gid.isdigit())


def user_problems(deploy: Path, objects: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The gateway runs as an unprivileged user in every deploy file: its tools' sandbox then starts as that
    user too, and a process that escaped one would own nothing."""
    problems = []
    users = [line.split()[1] for line in (deploy / "Dockerfile").read_text().splitlines()
             if line.split()[:1] == ["USER"] and len(line.split()) > 1]
    if not users or not _non_root_id(users[-1]):
        problems.append(f"Dockerfile: the image runs as {users[-1] if users else 'root'}; end on USER <uid> "
                        "(numeric, not 0)")
    services = (yaml.safe_load((deploy / "compose.yaml").read_text()) or {}).get("services") or {}
    for name, service in services.items():
        if (service.get("command") or [None])[0] == "run" and not _non_root_id(service.get("user", "")):
            problems.append(f"compose.yaml: service {name} sets no non-root user: (a numeric uid)")
    for file, obj in objects:
        template = pod_template(obj)
        if template is None:
            continue
        pod_spec = template.get("spec") or {}
        pod_context = pod_spec.get("securityContext") or {}
        for container in pod_spec.get("containers") or []:
            context = {**pod_context, **(container.get("securityContext") or {})}
            if context.get("runAsNonRoot") is not True or not _non_root_id(context.get("runAsUser", "")):
                problems.append(f"{file}: {obj['kind']}/{obj['metadata']['name']}: container {container['name']} "
                                "needs securityContext runAsNonRoot: true and a non-root runAsUser")
    unit = (deploy / "hermes-gateway.service").read_text().splitlines()
    user = next((line.split("=", 1)[1].strip() for line in unit if line.startswith("User=")), "root")
    if user in ("root", "0", ""):
        problems.append(f"hermes-gateway.service: the unit runs as {user}; set User= to an unprivileged account")
    return problems


def all_problems(root: Path) -> list[str]:
    deploy = root / "deploy"
    objects = load_manifests(deploy / "kubernetes")
    problems = schema_problems(objects)
    problems += reference_problems(objects, documented_objects(deploy / "README.md"))
    problems += replica_problems(objects)
    problems += compose_problems(deploy / "compose.yaml")
    problems += proxy_problems(deploy / "compose.yaml")
    problems += exposure_problems(deploy / "compose.yaml")
    problems += dockerfile_problems(deploy / "Dockerfile", root)
    problems += env_file_problems(deploy / ".env.example")
    problems += bot_problems(deploy, root)
    problems += user_problems(deploy, objects)
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    problems = all_problems(root)
    for problem in problems:
        print(f"deploy: {problem}", file=sys.stderr)
    if not problems:
        print(f"deploy: the Kubernetes manifests, the compose file and the Dockerfile are valid "
              f"(Kubernetes {KUBERNETES_VERSION} schemas, compose-spec)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
