"""The build names what it ships: an SBOM beside the image, provenance Cloud Build verifies, and
a Binary Authorization policy that admits only what Cloud Build attested."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from dev import image as image_tool
from tests.deploy import topology
from tests.helpers import HANG_GUARD

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "europe-west1-docker.pkg.dev/p/saas/backend@sha256:" + "b" * 64


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(topology.CLOUDBUILD.read_text())
    return loaded


def steps(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["id"]: step for step in config["steps"]}


def test_the_build_asks_for_verified_provenance_of_the_image_it_pushes(
    config: dict[str, Any],
) -> None:
    assert config["options"]["requestedVerifyOption"] == "VERIFIED"
    # Provenance covers the images the build lists; it lists the one it deploys.
    assert config["images"] == ["${_IMAGE}"]


def test_the_sbom_is_made_on_the_dockerfiles_base_and_stored_against_the_digest(
    config: dict[str, Any],
) -> None:
    found = steps(config)
    assert found["sbom"]["name"] == image_tool.pinned_base()
    upload = found["sbom-upload"]
    assert set(upload["waitFor"]) == {"push", "sbom"}
    script = upload["args"][1]
    assert "gcloud artifacts sbom load --source=/workspace/sbom.cdx.json" in script
    assert '--uri="$$(cat /workspace/image)"' in script  # the digest the push step wrote


def test_the_sbom_step_lists_every_locked_runtime_package(tmp_path: Path) -> None:
    """The step's script, run here with this checkout's uv and cyclonedx-py for the ones it
    installs: a CycloneDX document naming exactly the packages the image installs."""
    scripts, _ = topology.rendered("sbom")
    script = "\n".join(
        line for line in scripts["sbom"].splitlines() if not line.lstrip().startswith("pip ")
    ).replace("/workspace/", f"{tmp_path}/")
    venv = Path(os.environ.get("VIRTUAL_ENV") or ROOT / ".venv") / "bin"
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env={**os.environ, "PATH": f"{venv}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    sbom = json.loads((tmp_path / "sbom.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX"
    assert sbom["metadata"]["component"]["name"] == "saas-starter-backend"
    listed = {(c["name"].lower(), c["version"]) for c in sbom["components"]}
    locked = {
        tuple(line.split(" ", 1)[0].lower().split("=="))
        for line in (tmp_path / "requirements.txt").read_text().splitlines()
        if line and line[0].isalnum()
    }
    assert locked, "the lock has runtime packages"
    assert listed == locked
    assert {"flask", "stripe", "psycopg"} <= {name for name, _ in listed}
    assert all(c.get("purl", "").startswith("pkg:pypi/") for c in sbom["components"])
    assert f"sbom: {len(listed)} packages" in result.stdout


def release_calls(substitutions: dict[str, str]) -> list[list[str]]:
    scripts, _ = topology.rendered("release", substitutions)
    workspace = {f"secrets-{t}": "DATABASE_URL=DATABASE_URL:1" for t in ("api", "access", "emails")}
    workspace["image"] = DIGEST
    with topology.dry_run(scripts["deploy"], workspace=workspace) as found:
        return [call for call in found if call[:2] == ["run", "deploy"]]


def test_binary_authorization_is_asked_of_every_service_only_when_turned_on() -> None:
    off = release_calls({})
    assert len(off) == 3
    assert not [arg for call in off for arg in call if arg.startswith("--binary-authorization")]
    on = release_calls({"_BINARY_AUTHORIZATION": "default"})
    assert all("--binary-authorization=default" in call for call in on), on
    assert all(f"--image={DIGEST}" in call for call in on)


def test_the_policy_admits_only_what_cloud_build_attested() -> None:
    policy = yaml.safe_load((ROOT / "ops" / "binauthz" / "policy.yaml").read_text())
    rule = policy["defaultAdmissionRule"]
    assert rule["evaluationMode"] == "REQUIRE_ATTESTATION"
    assert rule["enforcementMode"] == "ENFORCED_BLOCK_AND_AUDIT_LOG"
    assert rule["requireAttestationsBy"] == ["projects/PROJECT_ID/attestors/built-by-cloud-build"]
    assert policy["name"] == "projects/PROJECT_ID/policy"
    # No rule lets anything else in: no allow-all default, no exempted image patterns.
    assert set(policy) <= {"name", "globalPolicyEvaluationMode", "defaultAdmissionRule"}
