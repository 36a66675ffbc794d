"""Logging for the whole service: modules use stdlib `logging`; this module renders the lines.

Production writes one JSON object per line on stdout with the fields Cloud Logging reads
(`severity`, `message`, `time`, `logging.googleapis.com/trace`, ...); development writes readable
single lines. `init_app` makes every line logged during a request carry that request's trace.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, TextIO

import flask
import structlog
from flask.logging import default_handler
from structlog.typing import EventDict, Processor

from core import tracing

TRACE_KEY = "logging.googleapis.com/trace"
SPAN_KEY = "logging.googleapis.com/spanId"
SAMPLED_KEY = "logging.googleapis.com/trace_sampled"
# Error Reporting takes a JSON line with a stack trace in `stack_trace`, or any line of this type
# (its `message` is then the error), grouped by `serviceContext` (Error Reporting's "Format errors
# in logs"). Without the type, an ERROR line that carries no traceback never reaches it.
REPORTED_ERROR_TYPE = (
    "type.googleapis.com/google.devtools.clouderrorreporting.v1beta1.ReportedErrorEvent"
)
_REPORTED = frozenset({"ERROR", "CRITICAL"})

_SEVERITIES = {
    "debug": "DEBUG",
    "info": "INFO",
    "warning": "WARNING",
    "error": "ERROR",
    "critical": "CRITICAL",
}
_SECRET_NAME = re.compile(
    r"secret|passw|token|authorization|cookie|(api|anon|role|private)_?key", re.I
)
# Chatty clients whose INFO lines repeat request URLs; their warnings still come through.
_QUIET = ("httpx", "httpcore", "urllib3", "hpack")

# The project the trace fields name (`projects/<id>/traces/<trace>`), set by init_app.
_project = {"id": "local-project"}


class _StdoutHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stdout` is at emit time (gunicorn and pytest swap it)."""

    _service_handler = True

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> TextIO:
        return sys.stdout

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def configure(
    *, json_output: bool, level: str = "INFO", service: Mapping[str, str] | None = None
) -> None:
    """Route every logger through one stdout handler: JSON lines or readable ones; idempotent.

    `service` is Error Reporting's service context (`service`, `version`) of ERROR lines."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_service_handler", False)]:
        root.removeHandler(handler)
    handler = _StdoutHandler()
    handler.setFormatter(_formatter(json_output=json_output, service=service))
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)


def init_app(app: flask.Flask, *, project_id: str) -> None:
    """Tag every line logged while `app` handles a request with the request's trace."""
    _project["id"] = project_id
    app.logger.removeHandler(default_handler)
    # First in line, so that lines logged by other hooks (auth, limits) carry the trace too.
    app.before_request_funcs.setdefault(None, []).insert(0, _begin_trace)
    app.teardown_request(_end_trace)


def trace_fields(*, traceparent: str, cloud_trace: str, project_id: str) -> dict[str, object]:
    """The Cloud Logging trace fields for a request's `traceparent` or `X-Cloud-Trace-Context`."""
    return _fields(
        tracing.from_headers(traceparent=traceparent, cloud_trace=cloud_trace), project_id
    )


def _fields(trace: tracing.Trace | None, project_id: str) -> dict[str, object]:
    if trace is None:
        return {}
    fields: dict[str, object] = {TRACE_KEY: f"projects/{project_id}/traces/{trace.trace_id}"}
    if trace.span_id:
        fields[SPAN_KEY] = trace.span_id
    fields[SAMPLED_KEY] = trace.sampled
    return fields


def _begin_trace() -> None:
    headers = flask.request.headers
    trace = tracing.from_headers(
        traceparent=headers.get("traceparent", ""),
        cloud_trace=headers.get("X-Cloud-Trace-Context", ""),
    )
    flask.g.trace_token = tracing.begin(trace)


def _end_trace(_exc: BaseException | None) -> None:
    token = flask.g.pop("trace_token", None)
    if token is not None:
        tracing.end(token)


def _formatter(
    *, json_output: bool, service: Mapping[str, str] | None
) -> structlog.stdlib.ProcessorFormatter:
    pre_chain: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        _redact_secrets,
        _add_time,
    ]
    renderer: list[Processor]
    if json_output:
        renderer = [_add_trace, structlog.processors.format_exc_info, _cloud_logging_fields]
        renderer.append(partial(_error_reporting_fields, dict(service or {"service": "unknown"})))
        renderer.append(structlog.processors.JSONRenderer(ensure_ascii=False))
    else:
        renderer = [_console_renderer()]
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=pre_chain,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
    )


def _console_renderer() -> Processor:
    return structlog.dev.ConsoleRenderer(
        colors=sys.stdout.isatty(),
        timestamp_key="time",
        exception_formatter=structlog.dev.plain_traceback,
        pad_event_to=40,
    )


def _add_time(_logger: Any, _method: str, event: EventDict) -> EventDict:
    record: logging.LogRecord | None = event.get("_record")
    created = datetime.fromtimestamp(record.created, UTC) if record else datetime.now(UTC)
    event["time"] = created.isoformat(timespec="microseconds").replace("+00:00", "Z")
    return event


def _redact_secrets(_logger: Any, _method: str, event: EventDict) -> EventDict:
    for key in [k for k in event if not k.startswith("_") and _SECRET_NAME.search(k)]:
        event[key] = "[redacted]"
    return event


def _add_trace(_logger: Any, _method: str, event: EventDict) -> EventDict:
    event.update(_fields(tracing.current(), _project["id"]))
    return event


def _cloud_logging_fields(_logger: Any, _method: str, event: EventDict) -> EventDict:
    level = str(event.pop("level", "info"))
    ordered: EventDict = {
        "severity": _SEVERITIES.get(level, "DEFAULT"),
        "message": str(event.pop("event", "")),
        "time": event.pop("time"),
        "logger": event.pop("logger", None),
    }
    if "exception" in event:
        ordered["stack_trace"] = event.pop("exception")
    ordered.update(event)
    return ordered


def _error_reporting_fields(
    service: Mapping[str, str], _logger: Any, _method: str, event: EventDict
) -> EventDict:
    if event.get("severity") in _REPORTED:
        event["@type"] = REPORTED_ERROR_TYPE
        event["serviceContext"] = dict(service)
    return event
