"""The image and its entry point: Dockerfile, .dockerignore, bin/serve, gunicorn.conf.py.

No Docker engine here, so the Dockerfile is checked statically; bin/serve and the gunicorn
settings run for real, on a stand-in app module in a scratch copy of the entry-point files.
"""

from __future__ import annotations

import inspect
import json
import os
import runpy
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from fnmatch import fnmatch
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import requests
from gunicorn.config import Config

from config import PRODUCTION_REQUIRED
from dev.local_google import id_token_claims, new_key, remove_signature, sign
from tests.helpers import HANG_GUARD, wait_for

ROOT = Path(__file__).resolve().parents[2]
ENTRY_FILES = ("bin/serve", "gunicorn.conf.py", "runtime", "config")


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's (INSTRUCTION, arguments), continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    pairs = [line.split(None, 1) for line in lines if line and not line.startswith("#")]
    return [(pair[0].upper(), pair[1] if len(pair) > 1 else "") for pair in pairs]


def test_every_file_the_dockerfile_copies_exists() -> None:
    copies = [args.split() for name, args in instructions() if name == "COPY"]
    sources = [src for words in copies if not words[0].startswith("--") for src in words[:-1]]
    assert sources, "the Dockerfile copies the checkout"
    assert all((ROOT / source).exists() for source in sources), sources


def test_the_image_installs_locked_runtime_dependencies_only() -> None:
    steps = instructions()
    runs = " ".join(args for name, args in steps if name == "RUN")
    bases = {args.split()[0] for name, args in steps if name == "FROM"}
    assert "uv sync --frozen --no-dev" in runs
    assert ("ARG", "PYTHON_IMAGE=python:3.11-slim") in steps
    assert bases == {"${PYTHON_IMAGE}"}, "build and runtime stages share the base image"


def test_the_image_runs_bin_serve_as_a_non_root_user() -> None:
    steps = instructions()
    user = [args for name, args in steps if name == "USER"][-1]
    [cmd] = [json.loads(args) for name, args in steps if name == "CMD"]
    workdir = [args for name, args in steps if name == "WORKDIR"][-1]
    assert user not in {"root", "0"}
    assert workdir == "/app"
    assert cmd == ["bin/serve"]
    serve = ROOT / cmd[0]
    assert os.access(serve, os.X_OK)
    assert serve.read_text().startswith("#!/usr/bin/env bash\n")


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip().lstrip("/") for line in lines if line.strip() and line[0] != "#"]


def ignored(path: str, patterns: list[str]) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    variants = [p for pattern in patterns for p in (pattern, pattern.removeprefix("**/"))]
    return any(fnmatch(prefix, pattern) for prefix in prefixes for pattern in variants)


def test_dockerignore_leaves_out_local_state() -> None:
    patterns = dockerignore()
    assert not [p for p in patterns if p.startswith("!")], "no exceptions: keep it a deny-list"
    for path in (".venv", ".data", ".git", ".env", "tests/conftest.py", "x/__pycache__/y.pyc"):
        assert ignored(path, patterns), path


def runtime_files() -> list[str]:
    """What the service imports or reads at run time: top-level modules and packages, data."""
    modules = [p.name for p in ROOT.glob("*.py")]
    packages = [
        p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in ("tests", "dev")
    ]
    return [*modules, *packages, *ENTRY_FILES, "templates", "supabase/migrations", "uv.lock"]


def test_dockerignore_keeps_everything_the_service_runs() -> None:
    patterns = dockerignore()
    kept_out = [path for path in runtime_files() if ignored(path, patterns)]
    assert "main.py" in runtime_files()
    assert not kept_out, f".dockerignore drops files the service needs: {kept_out}"


@pytest.fixture
def gunicorn_settings(monkeypatch: pytest.MonkeyPatch) -> tuple[Config, dict[str, Any]]:
    """gunicorn.conf.py read the way gunicorn reads a config file."""
    monkeypatch.setenv("PORT", "9123")
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    namespace = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    cfg = Config()
    for name, value in namespace.items():
        if name in cfg.settings:
            cfg.set(name, value)
    return cfg, namespace


def test_gunicorn_settings_fit_cloud_run(gunicorn_settings: tuple[Config, dict[str, Any]]) -> None:
    cfg, _ = gunicorn_settings
    assert cfg.bind == ["0.0.0.0:9123"]
    assert cfg.workers == 3
    assert cfg.worker_class_str == "gthread"
    assert cfg.threads == 16  # the api's and access's --concurrency (cloudbuild.yaml)
    assert cfg.graceful_timeout == 8, "Cloud Run kills 10 s after SIGTERM"
    assert cfg.timeout == 0
    assert cfg.accesslog is None
    assert cfg.control_socket_disable is True
    assert cfg.preload_app is False


def test_gunicorn_config_names_only_real_settings(
    gunicorn_settings: tuple[Config, dict[str, Any]],
) -> None:
    cfg, namespace = gunicorn_settings
    helpers = {"annotations", "Any"}
    names = [
        name
        for name, value in namespace.items()
        if not name.startswith("_") and name not in helpers
        if not isinstance(value, ModuleType) and not inspect.isclass(value)
    ]
    assert "worker_exit" in names
    assert [name for name in names if name not in cfg.settings] == []


def test_worker_exit_without_the_app_loaded_does_nothing(
    gunicorn_settings: tuple[Config, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, namespace = gunicorn_settings
    monkeypatch.delitem(sys.modules, "main", raising=False)
    namespace["worker_exit"](None, None)


def test_serve_refuses_an_unknown_target() -> None:
    env = {**os.environ, "FUNCTION_TARGET": "billing"}
    result = subprocess.run([ROOT / "bin/serve"], env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "FUNCTION_TARGET must be one of api, access, emails, not 'billing'" in result.stderr


STAND_IN_MAIN = """
import logging, os, pathlib, signal, time
from runtime import lifecycle

MARKS = pathlib.Path(os.environ["MARKS"])
# Imported in the worker after gunicorn set its own SIGTERM handler: noted, then passed on.
_gunicorns = signal.getsignal(signal.SIGTERM)

def _on_term(signum, frame):
    (MARKS / f"term-{os.getpid()}").touch()
    _gunicorns(signum, frame)

signal.signal(signal.SIGTERM, _on_term)

def access(event):
    (MARKS / "started").touch()
    # In flight until its worker is told to stop, however slow the machine: the drain is
    # certain to be exercised, and no sleep has to outlast the test's reaction.
    while not (MARKS / f"term-{os.getpid()}").exists():
        time.sleep(0.01)
    logging.getLogger("main").info("handled %s", event["id"])

def shutdown():
    (MARKS / f"shutdown-{os.getpid()}").touch()

lifecycle.on_shutdown(shutdown)
"""
# Production settings with every secret present (none of them used by the stand-in).
PRODUCTION = {name.upper(): f"stand-in-{name}" for name in PRODUCTION_REQUIRED} | {
    "APP_ENV": "production",
    "EVENT_BUS": "pubsub",
    "SITE_URL": "https://shop.acme.dev",
    "SUPABASE_URL": "https://ref.supabase.co",
    "DATABASE_URL": "postgresql://u:p@127.0.0.1:1/db",
    "PUSH_AUDIENCE": "https://saas-access-1.europe-west1.run.app",
    "PUSH_SERVICE_ACCOUNT": "saas-push@demo.iam.gserviceaccount.com",
}


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The entry-point files beside a stand-in `main.py`."""
    # `core` too: the logs' trace lives there (core/tracing.py); and the push token's check.
    for name in (*ENTRY_FILES, "core", "adapters/__init__.py", "adapters/push_auth.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("test*"))
        else:
            shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / "main.py").write_text(STAND_IN_MAIN)
    (tmp_path / "marks").mkdir()
    return tmp_path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def subscriber(checkout: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    env = {**os.environ, **PRODUCTION, "FUNCTION_TARGET": "access", "PORT": str(port)}
    env |= {
        "WEB_CONCURRENCY": "2",
        "GOOGLE_CLOUD_PROJECT": "demo",
        "MARKS": str(checkout / "marks"),
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    process = subprocess.Popen(
        [checkout / "bin/serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process, f"http://127.0.0.1:{port}/"
    finally:
        if process.poll() is None:
            process.kill()
        if process.stdout is not None and not process.stdout.closed:
            process.communicate()


def accepts_connections(url: str) -> bool:
    host, port = url.removeprefix("http://").rstrip("/").split(":")
    with socket.socket() as sock:
        return sock.connect_ex((host, int(port))) == 0


def post_event(url: str) -> requests.Response:
    headers = {"ce-id": "evt-1", "ce-source": "test", "ce-type": "demo", "ce-specversion": "1.0"}
    headers["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    # The push token as Cloud Run forwards it once its invoker check verified it.
    claims = id_token_claims(
        audience=PRODUCTION["PUSH_AUDIENCE"], email=PRODUCTION["PUSH_SERVICE_ACCOUNT"]
    )
    headers["Authorization"] = f"Bearer {remove_signature(sign(claims, new_key(), 'k1'))}"
    return requests.post(url, json={}, headers=headers, timeout=HANG_GUARD)


def test_sigterm_drains_the_request_in_flight_then_shuts_down(
    subscriber: tuple[subprocess.Popen[str], str], checkout: Path
) -> None:
    process, url = subscriber
    marks = checkout / "marks"
    wait_for(lambda: accepts_connections(url) or process.poll() is not None)
    assert process.poll() is None, "the server exited at start-up"
    with ThreadPoolExecutor(max_workers=1) as pool:
        response = pool.submit(post_event, url)
        wait_for(lambda: (marks / "started").exists() or response.done())
        process.send_signal(signal.SIGTERM)
        assert response.result().status_code == 200
    # Its output read while it exits (a full pipe would stall it); the bound is only the hang
    # guard, not Cloud Run's 10 s grace: how fast it drains is not what this test checks.
    output = process.communicate(timeout=HANG_GUARD)[0]
    assert process.returncode == 0
    records = [json.loads(line) for line in output.splitlines()]
    [handled] = [r for r in records if r["message"] == "handled evt-1"]
    assert handled["logging.googleapis.com/trace"].endswith("/4bf92f3577b34da6a3ce929d0e0e4736")
    assert len(list(marks.glob("shutdown-*"))) == 2, "the shutdown hooks ran in each worker"
