"""The Postgres connections cloudbuild.yaml's services can open fit the pooler (docs/capacity.md).

The deploy step runs in a dry run (tests/deploy/topology.py): each `gcloud run deploy` and
`gcloud run jobs deploy` call gives the instance or task limit, and its env-vars file the
processes (`WEB_CONCURRENCY`), threads and pool each one runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from config import Settings
from tests.conftest import SummaryLines
from tests.deploy import topology

# Supavisor's client connections (transaction mode) on the smallest computes, Nano and Micro.
POOLER_CLIENTS = 200
TARGETS = ("api", "access", "emails")


@dataclass(frozen=True)
class Deployed:
    """One Cloud Run service or job, as far as Postgres connections go."""

    name: str
    job: bool
    instances: int  # --max-instances of a service, --tasks of a job
    workers: int
    threads: int
    pool: int

    @property
    def peak(self) -> int:
        return self.instances * self.workers * self.pool


def _default(name: str) -> Any:
    return Settings.model_fields[name].default


def _deployed(call: list[str]) -> Deployed:
    flags = dict(arg.split("=", 1) for arg in call if arg.startswith("--") and "=" in arg)
    file = flags["--env-vars-file"]
    env: dict[str, str] = yaml.safe_load(Path(file).read_text())
    assert "DATABASE_POOL_SIZE" in env, f"{file} leaves the pool at its local default"
    pool = Settings.model_validate(
        {"database_pool_size": env["DATABASE_POOL_SIZE"]}
    ).database_pool_size
    if call[1] == "jobs":  # `flask --app main ...`: one process, one thread
        return Deployed(call[3], True, int(flags.get("--tasks", "1")), 1, 1, pool)
    assert "--max-instances" in flags, f"{call[2]}: Cloud Run's default limit is 100 instances"
    return Deployed(
        call[2],
        False,
        int(flags["--max-instances"]),
        int(env.get("WEB_CONCURRENCY", _default("web_concurrency"))),
        int(env.get("GUNICORN_THREADS", _default("gunicorn_threads"))),
        pool,
    )


@pytest.fixture(scope="module")
def deployed() -> list[Deployed]:
    scripts, _ = topology.rendered("capacity")
    workspace = {f"secrets-{target}": "DATABASE_URL=DATABASE_URL:3" for target in TARGETS}
    workspace["image"] = "europe-west1-docker.pkg.dev/p/saas/backend@sha256:" + "0" * 64
    with topology.dry_run(scripts["deploy"], workspace=workspace) as calls:
        return [
            _deployed(call)
            for call in calls
            if call[:2] == ["run", "deploy"] or call[:3] == ["run", "jobs", "deploy"]
        ]


def test_every_service_and_job_sets_its_pool(deployed: list[Deployed]) -> None:
    names = [d.name.rsplit("-", 1)[-1] for d in deployed]
    assert sorted(names) == sorted([*TARGETS, "reconcile"])


def test_no_pool_is_larger_than_its_process_has_threads(deployed: list[Deployed]) -> None:
    oversized = [d.name for d in deployed if d.pool > d.threads and not d.job]
    assert oversized == [], "a connection no thread can use is one the pooler lacks elsewhere"


def test_every_process_at_once_stays_under_the_pooler_limit(
    deployed: list[Deployed], summary: SummaryLines
) -> None:
    total = sum(d.peak for d in deployed)
    summary("postgres connections").append(
        ", ".join(f"{d.name.rsplit('-', 1)[-1]} {d.peak}" for d in deployed)
        + f": {total} at most, of the pooler's {POOLER_CLIENTS} (Nano, Micro)"
    )
    assert total <= POOLER_CLIENTS
