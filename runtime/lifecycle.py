"""What a process must do before it exits: flush publishes, close pools (standard library only).

Whoever builds something that needs closing registers it here; gunicorn's `worker_exit` and
the dev server call `shutdown()`, without knowing what was built.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_hooks: list[Callable[[], None]] = []
_lock = threading.Lock()


def on_shutdown(hook: Callable[[], None]) -> None:
    """Run `hook` at shutdown, after the hooks registered later (last built, first closed)."""
    with _lock:
        _hooks.append(hook)


def shutdown() -> None:
    """Run and forget every registered hook; one failing does not stop the others."""
    with _lock:
        hooks = _hooks[::-1]
        _hooks.clear()
    for hook in hooks:
        try:
            hook()
        except Exception:
            log.exception("shutdown hook %r failed", hook)
