"""A release as cloudbuild.yaml makes it: the pushed image by digest, each service's new revision
first without traffic under a tag, gated by its probes, the api smoke-tested on the tag's own
URL, then promoted. The deploy script runs in a dry run (tests/deploy/topology.py); its smoke
test runs for real against the API over HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.conftest import Api
from tests.deploy import topology
from tests.helpers import HANG_GUARD

DIGEST = "europe-west1-docker.pkg.dev/p/saas/backend@sha256:" + "a" * 64
TAG = "b-dry-run"  # the BUILD_ID of the dry run is "dry-run"
HEALTH = {"api": "/api/health", "access": "/healthz", "emails": "/healthz"}


@pytest.fixture(scope="module")
def calls() -> list[list[str]]:
    scripts, _ = topology.rendered("release")
    workspace = {f"secrets-{t}": f"DATABASE_URL=DATABASE_URL:{n}" for n, t in enumerate(HEALTH)}
    workspace["image"] = DIGEST
    with topology.dry_run(scripts["deploy"], workspace=workspace) as found:
        return list(found)


def flags(call: list[str]) -> dict[str, str]:
    return dict(arg.split("=", 1) for arg in call if arg.startswith("--") and "=" in arg)


def deploys(calls: list[list[str]]) -> dict[str, list[str]]:
    return {c[2].rsplit("-", 1)[-1]: c for c in calls if c[:2] == ["run", "deploy"]}


def test_each_service_gets_the_pushed_image_by_digest_under_the_release_tag(
    calls: list[list[str]],
) -> None:
    found = deploys(calls)
    assert set(found) == set(HEALTH)
    for target, call in found.items():
        given = flags(call)
        assert given["--image"] == DIGEST
        assert given["--tag"] == TAG
        assert "--no-traffic" in call, f"{target} takes traffic before its smoke test"
        assert given["--cpu"] == "1"
        assert given["--memory"] == "512Mi"
        assert not given["--set-secrets"].endswith(":latest")
        path = HEALTH[target]
        assert given["--startup-probe"].startswith(f"httpGet.path={path},httpGet.port=8080")
        assert given["--liveness-probe"].startswith(f"httpGet.path={path},httpGet.port=8080")
    [job] = [c for c in calls if c[:3] == ["run", "jobs", "deploy"]]
    assert flags(job)["--image"] == DIGEST


def test_the_api_is_promoted_only_after_its_smoke_test(calls: list[list[str]]) -> None:
    order = [" ".join(c[:3]) + (f" {c[3]}" if len(c) > 3 else "") for c in calls]
    promote = [n for n, c in enumerate(calls) if c[:3] == ["run", "services", "update-traffic"]]
    promoted = [calls[n][3].rsplit("-", 1)[-1] for n in promote]
    assert promoted == ["access", "emails", "api"]
    assert all(flags(calls[n])["--to-tags"] == f"{TAG}=100" for n in promote)
    api_deploy = next(
        n for n, c in enumerate(calls) if c[:2] == ["run", "deploy"] and "api" in c[2]
    )
    smoke = [n for n, c in enumerate(calls) if c[:1] == ["python3"] and n > api_deploy]
    assert len(smoke) == 2, order  # the tag's URL, then the smoke test
    assert api_deploy < smoke[-1] < promote[-1]


def test_emails_has_one_instance_at_most_across_its_revisions(calls: list[list[str]]) -> None:
    [limit] = [c for c in calls if c[:4] == ["beta", "run", "services", "update"]]
    assert limit[4].endswith("-emails")
    assert flags(limit)["--max"] == "1"


def smoke_script() -> str:
    """The smoke test's Python, as the deploy step runs it."""
    config: dict[str, Any] = yaml.safe_load(topology.CLOUDBUILD.read_text())
    [script] = [s["args"][1] for s in config["steps"] if s["id"] == "deploy"]
    found = re.search(r"python3 - <<'PY'\n(.*?)\nPY\n", script, re.S)
    assert found
    return found[1]


def run_smoke(url: str, secret: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SMOKE_URL": url,
        "STRIPE_WEBHOOK_SECRET": secret,
        "STRIPE_PUBLISHABLE_KEY": "pk_test_x",
    }
    return subprocess.run(
        [sys.executable, "-c", smoke_script()],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )


def test_the_smoke_test_passes_on_a_healthy_api_with_the_live_secret(
    api_factory: Callable[..., Api],
) -> None:
    api = api_factory(stripe_webhook_secret="whsec_release_test", stripe_secret_key="sk_test_x")
    done = run_smoke(api.url, "whsec_release_test")
    assert done.returncode == 0, done.stderr
    assert f"smoke test passed on {api.url}" in done.stdout


def test_the_smoke_test_fails_when_the_revision_has_another_secret(
    api_factory: Callable[..., Api],
) -> None:
    api = api_factory(stripe_webhook_secret="whsec_release_test", stripe_secret_key="sk_test_x")
    done = run_smoke(api.url, "whsec_not_the_one_deployed")
    assert done.returncode != 0
    assert "400" in done.stderr
