"""The subscriber targets (`access`, `emails`) as a WSGI app for gunicorn, like the API.

`functions-framework` builds this same Flask app, then serves it with gunicorn options it fixes
itself (30 s graceful timeout, no `worker_exit` hook, plain-text logs). Handing the app to our
gunicorn instead lets both paths share `gunicorn.conf.py`: drained within Cloud Run's 10 s grace,
closed on worker exit, JSON logs. `bin/serve` runs `gunicorn 'runtime.subscriber_app:create_app()'`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import flask
import functions_framework

from config import Settings
from core import tracing
from runtime import logs
from runtime.targets import TARGETS

log = logging.getLogger(__name__)

MAIN = Path(__file__).resolve().parents[1] / "main.py"


def create_app(target: str | None = None) -> flask.Flask:
    """The Functions Framework app for one CloudEvent target of `main.py` (FUNCTION_TARGET's)."""
    settings = Settings()
    name = target or settings.function_target
    if name not in TARGETS:
        raise ValueError(f"FUNCTION_TARGET must be one of {', '.join(TARGETS)}, not {name!r}")
    app = functions_framework.create_app(name, str(MAIN), "cloudevent")  # type: ignore[no-untyped-call]
    if not isinstance(app, flask.Flask):
        raise TypeError(f"{name} must be a synchronous CloudEvent function")
    logs.init_app(app, project_id=settings.google_cloud_project)
    # Cloud Run's startup and liveness probes dial the container directly, with no token.
    app.add_url_rule("/healthz", "healthz", _healthz, methods=["GET"])
    # Always: a push target without its push settings refuses every push rather than
    # accepting anyone's (production does not start without them, config/delivery.py).
    require_push_token(app, settings)
    # After the token check: a stranger's body is never read.
    app.before_request(_join_message_trace)
    return app


def _join_message_trace() -> None:
    """Log a push under the trace its message was published in (the webhook request's), in a
    span of its own, rather than under the push request's own trace."""
    body = flask.request.get_json(silent=True)
    message = body.get("message") if isinstance(body, dict) else None
    found = message.get("attributes") if isinstance(message, dict) else None
    value = found.get(tracing.ATTRIBUTE) if isinstance(found, dict) else None
    trace = tracing.from_traceparent(value) if isinstance(value, str) else None
    if trace is not None:
        # Undone with the request's own trace when the request ends (runtime/logs.py).
        tracing.begin(trace.child())


def _healthz() -> flask.typing.ResponseReturnValue:
    return flask.jsonify(status="ok")


def require_push_token(app: flask.Flask, settings: Settings) -> None:
    """Answer 401 to any request but `GET /healthz` without Pub/Sub's OIDC token for this
    subscription; to every one of them while PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT are unset.

    Cloud Run's IAM check already keeps strangers out of a private service, and forwards the
    token it verified with the signature removed: that form is accepted on its claims while
    PUSH_INVOKER_IAM_CHECK is on, unless the request came with X-Serverless-Authorization (then
    Cloud Run checked that header and passed `Authorization` through untouched). With the
    invoker check off (`allUsers` as invoker, `--no-invoker-iam-check`), PUSH_INVOKER_IAM_CHECK
    must be off too, and only a token with Google's signature passes. The deploy verifies after
    each release that the check stands (docs/deploy.md, "Push authentication").
    """
    from adapters.push_auth import InvalidPushToken, PushVerifier

    verifier = None
    if settings.push_audience and settings.push_service_account:
        verifier = PushVerifier(
            audience=settings.push_audience,
            service_account=settings.push_service_account,
            certs_url=str(settings.push_certs_url),
        )
    else:
        log.warning("PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT are unset: every push is refused (401)")

    @app.before_request
    def _authenticate() -> flask.typing.ResponseReturnValue | None:
        request = flask.request
        if request.method == "GET" and request.path == "/healthz":
            return None
        stripped_ok = (
            settings.push_invoker_iam_check and "X-Serverless-Authorization" not in request.headers
        )
        try:
            if verifier is None:
                raise InvalidPushToken("PUSH_AUDIENCE and PUSH_SERVICE_ACCOUNT are unset")
            verifier.verify(request.headers.get("Authorization"), signature_removed_ok=stripped_ok)
        except InvalidPushToken as exc:
            log.warning("push refused: %s", exc)
            return flask.jsonify(error="Invalid or missing push token"), 401
        return None
