"""Gunicorn settings for every target `bin/serve` starts (the API and both subscribers).

Sized and timed for Cloud Run: SIGTERM, then SIGKILL ten seconds later.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from gunicorn import glogging

import logs

bind = f"0.0.0.0:{os.environ.get('PORT', '8080')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "8"))

# Drain in-flight requests for at most 8 s, leaving time for `main.shutdown()` before the kill.
graceful_timeout = 8
# gthread workers heartbeat from their event loop whatever a request does, so no worker timeout:
# Cloud Run's request timeout bounds requests (the setting Cloud Run's own samples use).
timeout = 0
# Cloud Run writes a request log line for every request already.
accesslog = None
# No gunicornc control socket: nothing in a container uses it, and it would write under $HOME.
control_socket_disable = True
# The default (no preload): every worker imports `main` after the fork, so no pool or gRPC
# channel is ever shared between processes.
preload_app = False


class ServiceLogger(glogging.Logger):  # type: ignore[misc]  # gunicorn is untyped
    """Gunicorn's own lines in the service's format (JSON in production) on stdout."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        logs.configure(json_output=os.environ.get("APP_ENV") == "production", level=cfg.loglevel)
        for log in (self.error_log, self.access_log):
            for handler in list(log.handlers):
                log.removeHandler(handler)
            log.propagate = True


logger_class = ServiceLogger


def worker_exit(server: Any, worker: Any) -> None:
    """Flush pending publishes and close the pool of a worker that imported the app."""
    main = sys.modules.get("main")
    shutdown = getattr(main, "shutdown", None)
    if callable(shutdown):
        shutdown()
