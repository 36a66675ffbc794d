"""cloudbuild.yaml's deploy step run twice, as two builds run it, against a recording `gcloud`
that keeps the services between them (tests/deploy/fake_gcloud.py): the second build keeps what
the founder configured (the api's ingress, CORS_ORIGINS, COOKIE_DOMAIN, TRUSTED_PROXY_HOPS, the
brand, a variable set by hand); and the check-private step fails the build when a subscriber
is reachable without Cloud Run's invoker check.

The scripts run in bash as Cloud Build runs them, with the build's substitutions applied; the
smoke test is recorded instead of sent (no revision answers here; test_release.py runs it
against the API).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import topology
from tests.helpers import HANG_GUARD

FAKE = Path(__file__).with_name("fake_gcloud.py")
PROJECT = "acme-prod"
DIGEST = "europe-west1-docker.pkg.dev/acme-prod/saas/backend@sha256:" + "b" * 64
SECRETS = {
    "api": "DATABASE_URL=DATABASE_URL:3,STRIPE_SECRET_KEY=STRIPE_SECRET_KEY:2",
    "access": "DATABASE_URL=DATABASE_URL:3,SUPABASE_SECRET_KEY=SUPABASE_SECRET_KEY:1",
    "emails": "DATABASE_URL=DATABASE_URL:3,RESEND_API_KEY=RESEND_API_KEY:1",
}
REQUIRED = {
    "_SITE_URL": "https://shop.acme.dev",
    "_SUPABASE_URL": "https://ref.supabase.co",
    "_STRIPE_PUBLISHABLE_KEY": "pk_live_acme",
    "_EMAIL_FROM_NOREPLY": "Acme <noreply@mail.acme.dev>",
    "_EMAIL_FROM_ADMIN": "Marc at Acme <marc@mail.acme.dev>",
    "_SUPPORT_EMAIL": "support@acme.dev",
}
FOUNDER = {
    "_INGRESS": "internal-and-cloud-load-balancing",
    "_TRUSTED_PROXY_HOPS": "2",
    "_CORS_ORIGINS": "https://app.acme.dev,https://www.acme.dev",
    "_COOKIE_DOMAIN": "acme.dev",
    "_BRAND_NAME": "Acme's Shop",
}
# The smoke test reaches a revision's URL: here it is recorded, and every other python3 runs.
PYTHON3 = f"""#!/bin/bash
if [[ -n "${{SMOKE_URL:-}}" ]]; then
  echo "python3 smoke test on $SMOKE_URL (recorded)"
  cat > /dev/null
  exit 0
fi
exec {sys.executable} "$@"
"""


@dataclass
class Cloud:
    """The project as the fake `gcloud` keeps it, and the builds run against it."""

    home: Path

    def build(self, *steps: str, **substitutions: str) -> subprocess.CompletedProcess[str]:
        """The steps of one build, in order, stopping at the first that fails."""
        scripts, _ = topology.rendered(PROJECT, {**REQUIRED, **substitutions})
        workspace = self.home / "workspace"
        workspace.mkdir(exist_ok=True)
        (workspace / "image").write_text(DIGEST)
        for target, pairs in SECRETS.items():
            (workspace / f"secrets-{target}").write_text(pairs)
        result = subprocess.CompletedProcess[str]([], 0, "", "")
        for step in steps:
            result = subprocess.run(
                ["bash", "-c", scripts[step].replace("/workspace/", f"{workspace}/")],
                env={
                    "PATH": f"{self.home / 'bin'}:/usr/bin:/bin",
                    "FAKE_GCLOUD_DIR": str(self.home),
                    "STRIPE_WEBHOOK_SECRET": "whsec_live",
                },
                capture_output=True,
                text=True,
                timeout=HANG_GUARD,
                check=False,
            )
            if result.returncode:
                return result
        return result

    def release(self, **substitutions: str) -> None:
        done = self.build("deploy", **substitutions)
        assert done.returncode == 0, done.stderr

    @property
    def services(self) -> dict[str, dict[str, Any]]:
        loaded: dict[str, dict[str, Any]] = json.loads((self.home / "services.json").read_text())
        return loaded

    def change(self, target: str, how: Callable[[dict[str, Any]], None]) -> None:
        """Change a service as the founder would by hand (console, `services update`)."""
        services = self.services
        how(services[f"saas-{target}"])
        (self.home / "services.json").write_text(json.dumps(services))

    def env(self, target: str) -> dict[str, str]:
        """The service's plain variables."""
        service = self.services[f"saas-{target}"]
        found = service["spec"]["template"]["spec"]["containers"][0]["env"]
        return {e["name"]: e["value"] for e in found if "value" in e}

    def secrets(self, target: str) -> set[str]:
        service = self.services[f"saas-{target}"]
        found = service["spec"]["template"]["spec"]["containers"][0]["env"]
        return {e["name"] for e in found if "valueFrom" in e}

    def annotations(self, target: str) -> dict[str, str]:
        found: dict[str, str] = self.services[f"saas-{target}"]["metadata"]["annotations"]
        return found

    def calls(self) -> list[list[str]]:
        lines = (self.home / "calls.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]


@pytest.fixture
def cloud(tmp_path: Path) -> Cloud:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(f'#!/bin/bash\nexec {sys.executable} {FAKE} "$@"\n')
    (bin_dir / "python3").write_text(PYTHON3)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return Cloud(tmp_path)


def test_a_first_build_sets_safe_defaults(cloud: Cloud) -> None:
    cloud.release()
    assert cloud.annotations("api")["run.googleapis.com/ingress"] == "all"
    env = cloud.env("api")
    assert env["SITE_URL"] == "https://shop.acme.dev"
    assert env["EMAIL_FROM_ADMIN"] == "Marc at Acme <marc@mail.acme.dev>"
    for name in ("CORS_ORIGINS", "COOKIE_DOMAIN", "TRUSTED_PROXY_HOPS", "BRAND_NAME"):
        assert name not in env, f"{name} set although nobody gave it"
    for target in ("access", "emails"):
        assert cloud.annotations(target)["run.googleapis.com/ingress"] == "internal"
        assert "run.googleapis.com/invoker-iam-disabled" not in cloud.annotations(target)
    assert cloud.secrets("api") == {"DATABASE_URL", "STRIPE_SECRET_KEY"}


def test_a_second_build_keeps_what_the_founder_configured(cloud: Cloud) -> None:
    cloud.release(**FOUNDER)
    configured = {
        "TRUSTED_PROXY_HOPS": "2",
        "CORS_ORIGINS": "https://app.acme.dev,https://www.acme.dev",
        "COOKIE_DOMAIN": "acme.dev",
        "BRAND_NAME": "Acme's Shop",
    }
    assert cloud.env("api").items() >= configured.items()
    assert cloud.annotations("api")["run.googleapis.com/ingress"] == FOUNDER["_INGRESS"]

    # By hand between builds: a rate limit on the api, a variable on access.
    def by_hand(name: str, value: str) -> Callable[[dict[str, Any]], None]:
        def change(service: dict[str, Any]) -> None:
            env = service["spec"]["template"]["spec"]["containers"][0]["env"]
            env.append({"name": name, "value": value})

        return change

    cloud.change("api", by_hand("RATE_LIMIT_LEAD", "5/minute"))
    cloud.change("access", by_hand("GITHUB_API_URL", "https://github.acme.dev/api/v3"))

    # The next build, given none of it (a trigger's, or a checkout's with the required five),
    # and a new site URL.
    cloud.release(_SITE_URL="https://www.acme.dev")

    api = cloud.env("api")
    assert api.items() >= (configured | {"RATE_LIMIT_LEAD": "5/minute"}).items()
    assert api["SITE_URL"] == "https://www.acme.dev", "what the build sets still changes"
    assert cloud.annotations("api")["run.googleapis.com/ingress"] == FOUNDER["_INGRESS"]
    [*_, last_api_deploy] = [c for c in cloud.calls() if c[:3] == ["run", "deploy", "saas-api"]]
    assert f"--ingress={FOUNDER['_INGRESS']}" in last_api_deploy
    assert cloud.env("access")["GITHUB_API_URL"] == "https://github.acme.dev/api/v3"
    for target in ("access", "emails"):
        assert cloud.env(target)["BRAND_NAME"] == "Acme's Shop"
        assert "CORS_ORIGINS" not in cloud.env(target), "the api's settings stay the api's"
        assert cloud.annotations(target)["run.googleapis.com/ingress"] == "internal"
    # Secrets stay secrets: never copied over as plain values.
    assert cloud.secrets("api") == {"DATABASE_URL", "STRIPE_SECRET_KEY"}
    assert not cloud.secrets("api") & set(api)
    # The reconcile job runs with the api's variables, the founder's included.
    [*_, job] = [c for c in cloud.calls() if c[:3] == ["run", "jobs", "deploy"]]
    assert any(arg.startswith("--env-vars-file=") for arg in job)


def test_a_build_given_a_setting_changes_it(cloud: Cloud) -> None:
    cloud.release(**FOUNDER)
    cloud.release(_TRUSTED_PROXY_HOPS="1", _INGRESS="all")
    assert cloud.env("api")["TRUSTED_PROXY_HOPS"] == "1"
    assert cloud.annotations("api")["run.googleapis.com/ingress"] == "all"
    assert cloud.env("api")["COOKIE_DOMAIN"] == "acme.dev"


def test_the_build_passes_when_the_subscribers_are_private(cloud: Cloud) -> None:
    done = cloud.build("deploy", "check-private")
    assert done.returncode == 0, done.stderr
    assert "subscribers private" in done.stdout
    reads = [c[:3] for c in cloud.calls() if c[:3] == ["run", "services", "get-iam-policy"]]
    assert len(reads) == 2


def _bind(member: str, role: str = "roles/run.invoker") -> Callable[[dict[str, Any]], None]:
    def change(service: dict[str, Any]) -> None:
        service["iam"]["bindings"].append({"role": role, "members": [member]})

    return change


def _annotate(name: str, value: str) -> Callable[[dict[str, Any]], None]:
    def change(service: dict[str, Any]) -> None:
        service["metadata"]["annotations"][name] = value

    return change


BROKEN = {
    "allUsers may invoke": (_bind("allUsers"), "allUsers holds roles/run.invoker"),
    "any Google account may invoke": (
        _bind("allAuthenticatedUsers"),
        "allAuthenticatedUsers holds roles/run.invoker",
    ),
    "allUsers in another role": (
        _bind("allUsers", "roles/run.viewer"),
        "allUsers holds roles/run.viewer",
    ),
    "ingress all": (
        _annotate("run.googleapis.com/ingress", "all"),
        "ingress is 'all', not 'internal'",
    ),
    "ingress through a load balancer": (
        _annotate("run.googleapis.com/ingress", "internal-and-cloud-load-balancing"),
        "ingress is 'internal-and-cloud-load-balancing', not 'internal'",
    ),
    "invoker check off": (
        _annotate("run.googleapis.com/invoker-iam-disabled", "true"),
        "the invoker IAM check is disabled",
    ),
}


@pytest.mark.parametrize("target", ["access", "emails"])
@pytest.mark.parametrize("case", list(BROKEN))
def test_the_build_fails_when_a_subscriber_is_not_private(
    cloud: Cloud, target: str, case: str
) -> None:
    cloud.release()
    how, problem = BROKEN[case]
    cloud.change(target, how)
    done = cloud.build("check-private")
    assert done.returncode == 1
    assert f"saas-{target} is not private: {problem}" in done.stderr
    other = "emails" if target == "access" else "access"
    assert f"saas-{other} is not private" not in done.stderr
    assert "Push authentication" in done.stderr


def test_a_rebuild_over_a_public_binding_it_does_not_own_fails(cloud: Cloud) -> None:
    cloud.release()
    cloud.change("access", _bind("allAuthenticatedUsers"))
    cloud.change("emails", _annotate("run.googleapis.com/invoker-iam-disabled", "true"))
    done = cloud.build("deploy", "check-private")
    # The deploy turns the invoker check back on; a binding someone added stays, and fails.
    assert done.returncode == 1
    assert "saas-access is not private: allAuthenticatedUsers holds" in done.stderr
    assert "saas-emails is not private" not in done.stderr
