"""The composition root: importing `main` reads no setting, builds nothing, loads no SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = (
    "flask",
    "pydantic",
    "stripe",
    "supabase_auth",
    "github",
    "resend",
    "psycopg",
    "functions_framework",
    "google.cloud.pubsub_v1",
    "config",
)


def run_python(code: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", **env},
    )
    return out.stdout.strip().splitlines()[-1]


def test_importing_main_reads_no_setting_builds_nothing_and_loads_no_sdk() -> None:
    # Production settings without a single secret: an import that read them would fail.
    code = (
        "import json, sys, main\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps({'heavy': heavy, 'built': main._root.built is not None}))"
    )
    found = json.loads(run_python(code, {"APP_ENV": "production"}))
    assert found == {"heavy": [], "built": False}


def test_the_lazy_app_builds_the_api_on_first_use_only() -> None:
    code = (
        "import sys, main\n"
        "before = 'flask' in sys.modules\n"
        "app = main.app.load()\n"
        "sdks = [m for m in ('stripe', 'supabase_auth', 'github', 'jwt') if m in sys.modules]\n"
        "print(before, type(app).__name__, 'accounts.signin_routes' in sys.modules, sdks,"
        " sorted(r.rule for r in app.url_map.iter_rules())[:2])"
    )
    line = run_python(code, {"APP_ENV": "development"})
    # Built with every route, and no vendor's SDK loaded yet: the first call that needs one does.
    assert line.startswith("False Flask True [] ['/api/admin/audit', '/api/admin/customers']")


def test_the_modules_the_master_imports_load_no_sdk_and_no_grpc() -> None:
    # gunicorn.conf.py's `when_ready` imports them before the workers fork: a gRPC channel, a
    # thread or a pool made then would be shared by every worker.
    code = (
        "import sys, threading, runtime.api, runtime.subscriber_app\n"
        "sdks = ('stripe', 'supabase_auth', 'github', 'resend', 'jwt', 'grpc',"
        " 'google.cloud.pubsub_v1')\n"
        "print([m for m in sdks if m in sys.modules], threading.active_count())"
    )
    assert run_python(code, {"APP_ENV": "production"}) == "[] 1"


def test_a_subscriber_process_never_builds_the_api() -> None:
    # What functions-framework and `runtime.subscriber_app` do: load main, call a target.
    code = (
        "import sys, main\n"
        "main.root().dispatch('access')\n"
        "print(sorted(m for m in ('accounts.signin_routes', 'runtime.api') if m in sys.modules))"
    )
    assert run_python(code, {"APP_ENV": "development"}) == "[]"
