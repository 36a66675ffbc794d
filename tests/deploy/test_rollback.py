"""`ops/rollback.sh`: one command sends the api, access and e-mail back to a release's revisions.

`gcloud` is a stand-in on PATH that records each call and answers `run services describe` with
the api as Cloud Run describes it after three releases (`b-<build id>` tags, the newest
serving); the script is run as a person runs it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import HANG_GUARD

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "ops" / "rollback.sh"


def api_described(serving: str) -> dict[str, object]:
    revisions = {"b-1111aaaa": 10, "b-2222bbbb": 11, "b-3333cccc": 12}
    traffic: list[dict[str, object]] = [
        {
            "revisionName": f"saas-api-{n:05d}-xyz",
            "tag": tag,
            "percent": 100 if tag == serving else 0,
        }
        for tag, n in revisions.items()
    ]
    traffic.append({"revisionName": "saas-api-00009-old", "percent": 0})  # untagged
    return {"status": {"traffic": traffic}}


def run(
    tmp_path: Path, *args: str, serving: str = "b-3333cccc"
) -> tuple[int, list[list[str]], str]:
    calls = tmp_path / "calls"
    described = tmp_path / "described.json"
    described.write_text(json.dumps(api_described(serving)))
    stub = tmp_path / "bin" / "gcloud"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(
        "#!/usr/bin/env bash\n"
        f'printf "%s\\n" "$*" >> {calls}\n'
        f'if [[ "$1 $2 $3" == "run services describe" ]]; then cat {described}; fi\n'
    )
    stub.chmod(0o755)
    result = subprocess.run(
        [str(SCRIPT), *args],
        env={"PATH": f"{stub.parent}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    recorded = [line.split() for line in calls.read_text().splitlines()] if calls.exists() else []
    return result.returncode, recorded, result.stderr


def moves(recorded: list[list[str]]) -> list[tuple[str, str]]:
    return [
        (call[3], next(a for a in call if a.startswith("--to-tags=")))
        for call in recorded
        if call[:3] == ["run", "services", "update-traffic"]
    ]


def test_it_goes_back_to_the_release_before_the_one_serving_api_first(tmp_path: Path) -> None:
    code, recorded, stderr = run(tmp_path, "saas", "europe-west1")
    assert code == 0, stderr
    assert moves(recorded) == [
        ("saas-api", "--to-tags=b-2222bbbb=100"),
        ("saas-access", "--to-tags=b-2222bbbb=100"),
        ("saas-emails", "--to-tags=b-2222bbbb=100"),
    ]


def test_a_named_release_is_taken_as_named(tmp_path: Path) -> None:
    code, recorded, stderr = run(tmp_path, "saas", "europe-west1", "b-1111aaaa")
    assert code == 0, stderr
    assert {tags for _, tags in moves(recorded)} == {"--to-tags=b-1111aaaa=100"}
    assert not [c for c in recorded if c[:3] == ["run", "services", "describe"]]


@pytest.mark.parametrize("args", [("saas",), ()])
def test_without_a_prefix_and_region_it_changes_nothing(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    code, recorded, stderr = run(tmp_path, *args)
    assert code == 2
    assert "usage" in stderr
    assert recorded == []


def test_the_oldest_release_has_nothing_to_go_back_to(tmp_path: Path) -> None:
    code, recorded, stderr = run(tmp_path, "saas", "europe-west1", serving="b-1111aaaa")
    assert code != 0
    assert "no earlier release" in stderr
    assert moves(recorded) == []
