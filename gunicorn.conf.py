"""Gunicorn settings for every target `bin/serve` starts (the API and both subscribers).

Sized and timed for Cloud Run: SIGTERM, then SIGKILL ten seconds later. The settings are read
here, in the master, before any worker starts: production with a missing or unsafe secret
exits non-zero at start-up and names what is wrong, before anything answers `/healthz`.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from gunicorn import glogging

from config import Settings, SettingsError
from runtime import lifecycle, logs

try:
    _settings = Settings()
except SettingsError as exc:
    for problem in exc.problems:
        print(f"refusing to start: {problem}", file=sys.stderr, flush=True)
    raise SystemExit(1) from None

bind = f"0.0.0.0:{_settings.port}"
workers = _settings.web_concurrency
worker_class = "gthread"
threads = _settings.gunicorn_threads

# Drain in-flight requests for at most 8 s, leaving time for the shutdown hooks before the kill.
graceful_timeout = 8
# gthread workers heartbeat from their event loop whatever a request does, so no worker timeout:
# Cloud Run's request timeout bounds requests (the setting Cloud Run's own samples use).
timeout = 0
# Cloud Run writes a request log line for every request already.
accesslog = None
# No gunicornc control socket: nothing in a container uses it, and it would write under $HOME.
control_socket_disable = True
# The default (no preload): every worker builds the app after the fork, so no pool or gRPC
# channel is ever shared between processes (`when_ready` only imports modules that build nothing).
preload_app = False


class ServiceLogger(glogging.Logger):  # type: ignore[misc]  # gunicorn is untyped
    """Gunicorn's own lines in the service's format (JSON in production) on stdout."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        logs.configure(
            json_output=_settings.json_logs,
            level=cfg.loglevel,
            service=_settings.service_context,
        )
        for log in (self.error_log, self.access_log):
            for handler in list(log.handlers):
                log.removeHandler(handler)
            log.propagate = True


logger_class = ServiceLogger


def when_ready(server: Any) -> None:
    """Import, never build, the module that builds the target's app, once, in the master
    (listening already, before the first fork): the workers start with it and what it imports
    (the API's handlers, services and adapters; or the Functions Framework) loaded, instead of
    each loading it again, so two workers starting on one vCPU do not both pay for it.

    Importing builds nothing and loads no vendor's SDK and no gRPC (tests/test_main.py).
    """
    target = _settings.function_target
    importlib.import_module("runtime.api" if target == "api" else "runtime.subscriber_app")


def post_worker_init(worker: Any) -> None:
    """Build the app as the worker starts, so that no request waits for it."""
    load = getattr(worker.wsgi, "load", None)
    if callable(load):
        load()


def worker_exit(server: Any, worker: Any) -> None:
    """Flush pending publishes and close the pool of a worker that built them."""
    lifecycle.shutdown()
