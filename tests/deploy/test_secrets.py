"""Each service is given exactly the secrets its code reads, and requires them in production.

The secrets a target reads are found by running its code: the target's collaborators are built
by the real container over settings that record every field read (properties included, so
`jwt_secret` counts as SUPABASE_JWT_SECRET). For the api, the collaborators are those its
registered routes use (each handler module's `container().<name>` / `c.<name>`, read from its
source, and `deps.caller`'s); for a subscriber, those its subscriber is built with (access's
also those an account deletion's steps call, built on its first deletion request; emails's
also those a resend an admin asked for calls). On the Pub/Sub design the api holds neither:
it hands both to the targets. A new call
to a SaaS API from a target therefore changes what this test derives, and fails it until
the settings (config/) and cloudbuild.yaml agree.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from config import PRODUCTION_REQUIRED_BY_TARGET, TARGETS, Settings
from runtime.api import build_api
from runtime.container import Container

ROOT = Path(__file__).resolve().parents[2]
# The settings that are secrets (Secret Manager entries, cloudbuild.yaml's availableSecrets).
SECRETS = {
    "database_url",
    "supabase_publishable_key",
    "supabase_secret_key",
    "supabase_jwt_secret",
    "stripe_secret_key",
    "stripe_webhook_secret",
    "resend_api_key",
    "github_token",
    "usage_api_key",
    "stripe_meter_events_secret",
    "lead_link_secret",
}
# Read when set, not required: the deploy gives them only where they exist.
OPTIONAL = {
    "supabase_jwt_secret",
    "github_token",
    "usage_api_key",
    "stripe_meter_events_secret",
    "lead_link_secret",
}
# Collaborators `api.deps.caller` uses for every signed-in route.
CALLER = {"supabase_auth", "tokens"}


class Recording:
    """Settings that note every field read, properties' own reads included."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(type(self._settings), name, None)
        if isinstance(attribute, property) and attribute.fget is not None:
            return attribute.fget(self)
        if name in Settings.model_fields:
            self.read.add(name)
        return getattr(self._settings, name)


def everything(tmp_path: Path) -> Settings:
    """Every secret set (test values): whatever a target reads, it finds."""
    return Settings.model_validate(
        {
            "app_env": "test",
            # As deployed: the api publishes to Pub/Sub (the in-process bus would run the
            # subscribers, and their secrets, in the api's process).
            "event_bus": "pubsub",
            "database_url": "postgresql://u:p@127.0.0.1:1/db",
            "site_url": "https://shop.example.com",
            "supabase_url": "https://proj.supabase.co",
            "supabase_publishable_key": "anon",
            "supabase_secret_key": "service",
            "supabase_jwt_secret": "jwt-secret-of-at-least-thirty-two-characters",
            "stripe_secret_key": "sk_test_x",
            "stripe_publishable_key": "pk_test_x",
            "stripe_webhook_secret": "whsec_x",
            "resend_api_key": "re_x",
            "github_token": "ghp_x",
            "lead_link_secret": "lead-link-secret-of-this-deployment-0123456789",
            "usage_api_key": "usage-key-of-at-least-thirty-two-characters",
            "stripe_meter_events_secret": "whsec_meter_x",
            "enable_test_email": False,
            "email_outbox_dir": tmp_path / "outbox",
        }
    )


def handler_collaborators(module: object) -> set[str]:
    """The container attributes a handler module's functions use (`settings.<name>` for a
    setting they read themselves)."""
    tree = ast.parse(inspect.getsource(cast("Any", module)))
    names: set[str] = set()
    holders: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_container_call(node.value):
            holders |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            value = node.value
            if _is_container_call(value) or (isinstance(value, ast.Name) and value.id in holders):
                names.add(node.attr)
            # `c.settings.webhook_secret`: a setting the handler reads itself.
            if (
                isinstance(value, ast.Attribute)
                and value.attr == "settings"
                and (
                    _is_container_call(value.value)
                    or (isinstance(value.value, ast.Name) and value.value.id in holders)
                )
            ):
                names.add(f"settings.{node.attr}")
        if isinstance(node, ast.Name) and node.id == "caller":
            names |= CALLER
    return names - {"settings"}


def _is_container_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        # `_container()`: the container as a domain's routes type it (their own Protocol).
        and node.func.id in ("container", "_container")
    )


def secrets_read_by(target: str, settings: Settings) -> set[str]:
    recording = Recording(settings)
    container = Container(cast("Settings", recording))
    if target == "api":
        app = build_api(container)
        modules = {importlib.import_module(bp.import_name) for bp in app.blueprints.values()}
        used = set().union(*(handler_collaborators(m) for m in modules))
        assert {"db", "stripe", "supabase_auth", "tokens", "bus", "github"} <= used
        for name in sorted(used):
            owner, _, attribute = name.rpartition(".")
            getattr(container.settings if owner else container, attribute)
    else:
        container.subscriber(target)
        if target == "access":  # built on its first account deletion request
            assert container.leaving.accounts
        if target == "emails":  # a resend reads the copy back and sends it with its mailer
            assert container.mailer
    if "db" in container.__dict__:
        assert container.db.url  # the pool reads DATABASE_URL when it first connects
    return recording.read & SECRETS


def provisioned() -> dict[str, dict[str, set[str]]]:
    """cloudbuild.yaml's provision step: each target's required and optional secrets."""
    config = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    [script] = [s["args"][1] for s in config["steps"] if s["id"] == "provision"]
    found: dict[str, dict[str, set[str]]] = {}
    for kind in ("required", "optional"):
        block = re.search(rf"declare -A {kind}=\((.*?)\)\n", script, re.S)
        assert block, kind
        for target, names in re.findall(r"\[(\w+)\]=\"?([A-Z_ ]*)\"?", block[1]):
            found.setdefault(target, {})[kind] = {n.lower() for n in names.split()}
    return found


@pytest.mark.parametrize("target", ["api", *TARGETS])
def test_a_target_requires_exactly_the_secrets_its_code_reads(target: str, tmp_path: Path) -> None:
    read = secrets_read_by(target, everything(tmp_path))
    required = set(PRODUCTION_REQUIRED_BY_TARGET[target]) & SECRETS
    assert read - OPTIONAL == required


@pytest.mark.parametrize("target", ["api", *TARGETS])
def test_the_deploy_gives_each_service_exactly_its_secrets(target: str, tmp_path: Path) -> None:
    read = secrets_read_by(target, everything(tmp_path))
    given = provisioned()[target]
    assert given["required"] == read - OPTIONAL
    assert given["optional"] == read & OPTIONAL


def test_the_api_reads_resend_only_with_its_test_route(tmp_path: Path) -> None:
    settings = everything(tmp_path).model_copy(update={"enable_test_email": True})
    assert "resend_api_key" in secrets_read_by("api", settings)
    assert "resend_api_key" not in secrets_read_by("api", everything(tmp_path))
