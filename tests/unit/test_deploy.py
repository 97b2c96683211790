"""deploy/ can be followed: what CI's `.ci/validate_deploy.py` checks, run as part of the suite, offline."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from cli_kit import deploy_validator

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


@pytest.fixture(scope="module")
def validator() -> ModuleType:
    return deploy_validator()


def manifests(validator: ModuleType) -> list[tuple[str, dict]]:
    return validator.load_manifests(DEPLOY / "kubernetes")


def test_the_deploy_files_pass_the_validator_that_ci_runs() -> None:
    result = subprocess.run([sys.executable, str(ROOT / ".ci" / "validate_deploy.py")], capture_output=True,
                            text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


def test_every_object_a_manifest_refers_to_is_defined_or_created_by_a_documented_command(validator) -> None:
    objects = manifests(validator)
    assert validator.reference_problems(objects, validator.documented_objects(DEPLOY / "README.md")) == []
    kinds = {obj["kind"] for _, obj in objects}
    assert {"Deployment", "Service", "PersistentVolumeClaim"} <= kinds


def test_the_secret_is_created_by_one_documented_command(validator) -> None:
    assert ("Secret", "hermes-secrets") in validator.documented_objects(DEPLOY / "README.md")


def test_a_volume_claim_defined_nowhere_is_reported(validator) -> None:
    objects = [(f, o) for f, o in manifests(validator)
               if o["kind"] != "PersistentVolumeClaim" or o["metadata"]["name"] != "hermes-data"]
    problems = validator.reference_problems(objects, validator.documented_objects(DEPLOY / "README.md"))
    assert len(problems) == 1 and "PersistentVolumeClaim 'hermes-data'" in problems[0]


def test_a_secret_neither_defined_nor_documented_is_reported(validator) -> None:
    problems = validator.reference_problems(manifests(validator), set())
    assert len(problems) == 2 and all("Secret 'hermes-secrets'" in p for p in problems)  # gateway, postgres


def test_a_service_whose_selector_matches_no_pod_is_reported(validator) -> None:
    objects = copy.deepcopy(manifests(validator))
    service = next(o for _, o in objects if o["kind"] == "Service")
    service["spec"]["selector"] = {"app": "hermes-gateways"}
    problems = validator.reference_problems(objects, validator.documented_objects(DEPLOY / "README.md"))
    assert any("matches no workload" in p for p in problems)


def test_a_field_kubernetes_does_not_know_fails_schema_validation(validator) -> None:
    objects = copy.deepcopy(manifests(validator))
    deployment = next(o for _, o in objects if o["kind"] == "Deployment")
    assert validator.schema_problems(objects) == []
    deployment["spec"]["replicaz"] = 2
    assert any("replicaz" in p for p in validator.schema_problems(objects))
    del deployment["spec"]["replicaz"]
    deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "8080"
    assert any("containerPort" in p for p in validator.schema_problems(objects))


def test_the_readiness_probe_asks_ready_and_the_liveness_probe_asks_health(validator) -> None:
    deployment = next(o for _, o in manifests(validator) if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"


def test_a_compose_file_off_the_compose_spec_or_with_an_undeclared_volume_is_reported(validator, tmp_path) -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    (tmp_path / ".env.example").write_text("")
    good = tmp_path / "compose.yaml"
    broken = copy.deepcopy(compose)
    broken["services"]["gateway-1"]["build"]["context"] = str(ROOT)
    good.write_text(yaml.safe_dump(broken))
    assert validator.compose_problems(good) == []

    del broken["volumes"]["hermes-data"]
    good.write_text(yaml.safe_dump(broken))
    assert any("volume 'hermes-data'" in p for p in validator.compose_problems(good))

    broken["services"]["gateway-1"]["depends_on"]["postgres"]["condition"] = "whenever"
    good.write_text(yaml.safe_dump(broken))
    assert any("depends_on" in p for p in validator.compose_problems(good))


def test_a_deployment_of_one_replica_or_without_a_disruption_budget_for_its_pods_is_reported(validator) -> None:
    objects = copy.deepcopy(manifests(validator))
    assert validator.replica_problems(objects) == []
    deployment = next(o for _, o in objects if o["kind"] == "Deployment")
    budget = next(o for _, o in objects if o["kind"] == "PodDisruptionBudget")
    assert deployment["spec"]["replicas"] == 2 and budget["spec"]["minAvailable"] == 1
    deployment["spec"]["replicas"] = 1
    problems = validator.replica_problems(objects)
    assert any("runs 1 replica(s)" in p for p in problems) and any("minAvailable 1" in p for p in problems)
    deployment["spec"]["replicas"] = 2
    budget["spec"]["selector"]["matchLabels"] = {"app": "something-else"}
    problems = validator.replica_problems(objects)
    assert any("no PodDisruptionBudget selects its pods" in p for p in problems)
    assert any("selects no Deployment's pods" in p for p in problems)


def test_the_compose_proxy_must_route_to_every_gateway_replica_at_its_port(validator, tmp_path) -> None:
    assert validator.proxy_problems(DEPLOY / "compose.yaml") == []
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert {"gateway-1", "gateway-2", "proxy", "postgres"} == set(compose["services"])
    caddyfile = (DEPLOY / "Caddyfile").read_text()
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(compose))

    (tmp_path / "Caddyfile").write_text(caddyfile.replace("gateway-1:8080 gateway-2:8080", "gateway-1:8080"))
    assert any("every gateway service" in p for p in validator.proxy_problems(tmp_path / "compose.yaml"))
    (tmp_path / "Caddyfile").write_text(caddyfile.replace("gateway-2:8080 {", "gateway-2:9000 {"))
    assert any("serves HTTP on port 8080" in p for p in validator.proxy_problems(tmp_path / "compose.yaml"))
    (tmp_path / "Caddyfile").write_text(caddyfile.replace("gateway-2:8080 {", "postgres:5432 {"))
    assert any("no gateway service" in p for p in validator.proxy_problems(tmp_path / "compose.yaml"))

    del compose["services"]["gateway-2"]
    compose["services"]["proxy"]["depends_on"] = ["gateway-1"]
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(compose))
    (tmp_path / "Caddyfile").write_text(caddyfile)
    assert any("1 gateway replica(s)" in p for p in validator.proxy_problems(tmp_path / "compose.yaml"))
    del compose["services"]["proxy"]
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(compose))
    assert any("no reverse proxy" in p for p in validator.proxy_problems(tmp_path / "compose.yaml"))


def test_the_compose_env_file_has_an_example_to_copy(validator, tmp_path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text((DEPLOY / "compose.yaml").read_text().replace("context: ..", f"context: {ROOT}"))
    assert any("env_file .env" in p for p in validator.compose_problems(compose))
    (tmp_path / ".env.example").write_text("ANTHROPIC_API_KEY=\n")
    assert validator.compose_problems(compose) == []


def test_a_dockerfile_that_leaves_out_an_installed_package_is_reported(validator, tmp_path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text((DEPLOY / "Dockerfile").read_text().replace("COPY hermes_gateway ./hermes_gateway\n", ""))
    problems = validator.dockerfile_problems(dockerfile, ROOT)
    assert problems == ["Dockerfile: the package hermes_gateway is installed but never copied"]
    assert validator.dockerfile_problems(DEPLOY / "Dockerfile", ROOT) == []


def test_a_deploy_file_that_starts_a_bot_profile_that_does_not_exist_is_reported(validator, tmp_path) -> None:
    assert validator.bot_problems(DEPLOY, ROOT) == []
    for file in ("Dockerfile", "compose.yaml", "hermes-gateway.service"):
        text = (DEPLOY / file).read_text()
        assert "--bot" in text
        (tmp_path / file).write_text(text.replace("bots/telegram-dm-assistant", "bots/telegram-assistant"))
    problems = validator.bot_problems(tmp_path, ROOT)
    assert sorted(p.split(":")[0] for p in problems) == ["Dockerfile", "compose.yaml", "hermes-gateway.service"]
    assert all("no bot profile at bots/telegram-assistant/profile.yaml" in p for p in problems)


def test_the_env_file_template_is_read_alike_by_compose_kubectl_and_systemd(validator, tmp_path) -> None:
    assert validator.env_file_problems(DEPLOY / ".env.example") == []
    env = tmp_path / ".env.example"
    env.write_text("# comment\nANTHROPIC_API_KEY=\nexport TELEGRAM_BOT_TOKEN=x\nSLACK_BOT_TOKEN=\"xoxb\"\n")
    problems = validator.env_file_problems(env)
    assert [p.split(":")[1] for p in problems] == ["2", "3", "4"]  # an empty value counts as set


def test_a_deploy_file_that_would_run_the_gateway_as_root_is_reported(validator, tmp_path) -> None:
    objects = copy.deepcopy(manifests(validator))
    assert validator.user_problems(DEPLOY, objects) == []
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    (tmp_path / "Dockerfile").write_text(dockerfile.replace("USER 10001:10001", "USER hermes"))
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    del compose["services"]["gateway-2"]["user"]  # both replicas: one YAML anchor
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(compose))
    (tmp_path / "hermes-gateway.service").write_text(
        (DEPLOY / "hermes-gateway.service").read_text().replace("User=hermes", "User=root"))
    pod = next(o for _, o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    pod["containers"][0]["securityContext"] = {"runAsUser": 0}
    problems = validator.user_problems(tmp_path, objects)
    assert [p.split(":")[0] for p in problems] == ["Dockerfile", "compose.yaml", "compose.yaml", "gateway.yaml",
                                                   "hermes-gateway.service"], problems
    assert "service gateway-2" in problems[2] and "container gateway" in problems[3]
    (tmp_path / "Dockerfile").write_text(dockerfile.replace("USER 10001:10001\n", ""))
    assert validator.user_problems(tmp_path, objects)[0].startswith("Dockerfile: the image runs as root")


def test_only_the_webhook_paths_are_public_and_every_other_published_port_binds_loopback(validator) -> None:
    assert validator.exposure_problems(DEPLOY / "compose.yaml") == []
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    public = [port for service in compose["services"].values() for port in service.get("ports") or []
              if validator._published(port)[0] != "127.0.0.1"]
    assert public == ["8080:8080"]
    sites = validator.caddy_sites((DEPLOY / "Caddyfile").read_text())
    assert sites[":8080"] == {"/slack/events", "/telegram/*"}


def test_the_public_paths_are_the_ones_the_adapters_serve(validator) -> None:
    from adapters.slack.options import SlackOptions

    assert SlackOptions.model_fields["events_path"].default == "/slack/events"
    telegram = (ROOT / "adapters" / "telegram" / "adapter.py").read_text()
    assert 'self.webhook_path = f"/telegram/{engine.bot}"' in telegram
    public = validator.WEBHOOK_PATHS
    assert public == {"/slack/events", "/telegram/*"}


def test_a_proxy_passing_every_path_on_the_public_port_is_reported(validator, tmp_path) -> None:
    (tmp_path / "Caddyfile").write_text(":8080 {\n\treverse_proxy gateway-1:8080 gateway-2:8080\n}\n")
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(compose))
    problems = validator.exposure_problems(tmp_path / "compose.yaml")
    assert len(problems) == 1 and "8080:8080" in problems[0] and "['*']" in problems[0]


def test_a_metrics_port_published_on_every_interface_is_reported(validator, tmp_path) -> None:
    (tmp_path / "Caddyfile").write_text((DEPLOY / "Caddyfile").read_text())
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    compose["services"]["proxy"]["ports"] = ["8080:8080", "9101:9101", "127.0.0.1:9102:9102"]
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(compose))
    problems = validator.exposure_problems(tmp_path / "compose.yaml")
    assert len(problems) == 1 and "9101:9101" in problems[0] and "127.0.0.1" in problems[0]


def test_every_value_of_the_env_template_uncommented_is_kept_clean_by_docker_and_kubectl(validator) -> None:
    text = (DEPLOY / ".env.example").read_text()
    entries = validator.parse_env_file(validator.uncommented(text))
    assert {"TELEGRAM_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_BOT_TOKEN", "DISCORD_BOT_TOKEN"} <= {n for _, n, _ in entries}
    assert all(value and not any(c in value for c in " \t#'\"") for _, _, value in entries)
    assert validator.parse_env_file(text) == []  # nothing set until the operator uncomments it
    assert validator.env_file_problems(DEPLOY / ".env.example") == []


def test_an_inline_comment_or_an_empty_token_in_the_env_template_is_reported(validator, tmp_path) -> None:
    env = tmp_path / ".env.example"
    env.write_text("SLACK_BOT_TOKEN=\n# SLACK_APP_TOKEN=xapp-1   # Socket Mode\n")
    problems = validator.env_file_problems(env)
    assert len(problems) == 2
    assert "SLACK_BOT_TOKEN= is empty but set" in problems[0] and "SLACK_APP_TOKEN" in problems[1]


def test_the_filled_in_env_file_is_ignored_by_git() -> None:
    result = subprocess.run(["git", "check-ignore", "-q", "deploy/.env"], cwd=ROOT, timeout=30)
    assert result.returncode == 0


def test_the_gateways_restart_and_every_deploy_file_sets_hermes_home() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name in ("gateway-1", "gateway-2", "proxy"):
        assert compose["services"][name]["restart"] == "unless-stopped"
    for name in ("gateway-1", "gateway-2"):
        assert compose["services"][name]["environment"]["HERMES_HOME"] == "/data"
    unit = (DEPLOY / "hermes-gateway.service").read_text()
    assert "Environment=HERMES_HOME=/var/lib/hermes-gateway" in unit
    gateway = next(yaml.safe_load_all((DEPLOY / "kubernetes" / "gateway.yaml").read_text()))
    env = gateway["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HERMES_HOME", "value": "/data"} in env


def test_the_kubernetes_postgres_is_the_host_of_the_example_database_url(validator) -> None:
    objects = manifests(validator)
    services = {obj["metadata"]["name"] for _, obj in objects if obj["kind"] == "Service"}
    example = validator.uncommented((DEPLOY / ".env.example").read_text())
    url = next(value for _, name, value in validator.parse_env_file(example) if name == "HERMES_DATABASE_URL")
    host = url.split("@", 1)[1].split(":", 1)[0]
    assert host in services
    assert ("postgres/postgres.yaml", "StatefulSet") in {(f, o["kind"]) for f, o in objects}


def test_the_validator_needs_only_the_deploy_check_extra() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    source = (ROOT / ".ci" / "validate_deploy.py").read_text()
    imported = {line.split()[1].split(".")[0] for line in source.splitlines()
                if line.startswith(("import ", "from ")) and not line.startswith("from __future__")}
    third_party = imported - set(sys.stdlib_module_names)
    installed_by = {"kubernetes_validate": "kubernetes-validate", "jsonschema": "check-jsonschema",
                    "check_jsonschema": "check-jsonschema", "yaml": None}  # yaml: a core dependency
    assert third_party <= set(installed_by)
    wanted = {name for name in installed_by.values() if name}
    assert wanted <= {spec.split(">")[0] for spec in extras["deploy-check"]}


def test_every_deploy_file_gives_the_workspaces_a_file_system_of_their_own_apart_from_the_home() -> None:
    # a sandboxed command reads its workspace's path within its file system in /proc/self/mountinfo
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name in ("gateway-1", "gateway-2"):
        service = compose["services"][name]
        root = service["environment"]["HERMES_WORKSPACE_ROOT"]
        mounted = dict(reversed(v.split(":")[:2]) for v in service["volumes"])
        assert root in mounted and mounted[root] != mounted[service["environment"]["HERMES_HOME"]]
        assert mounted[root] in compose["volumes"]
    unit = (DEPLOY / "hermes-gateway.service").read_text()
    assert "Environment=HERMES_WORKSPACE_ROOT=/srv/hermes-workspaces" in unit
    assert "RequiresMountsFor=/srv/hermes-workspaces" in unit
    assert "/srv/hermes-workspaces ext4" in (DEPLOY / "README.md").read_text()  # the fstab line that makes it
    gateway = next(yaml.safe_load_all((DEPLOY / "kubernetes" / "gateway.yaml").read_text()))
    pod = gateway["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
    assert claims[mounts[env["HERMES_WORKSPACE_ROOT"]]] == "hermes-workspaces"
    assert claims[mounts[env["HERMES_HOME"]]] == "hermes-data"
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "chown 10001:10001 /data /workspaces" in dockerfile  # a fresh volume takes the image folder's owner
