"""logs: JSON lines Cloud Logging reads in production, readable lines in development."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import flask
import pytest

from config import Settings
from runtime import logs

PROJECT = "demo-project"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACE = f"projects/{PROJECT}/traces/{TRACE_ID}"

log = logging.getLogger("tests.demo")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Each test configures the root logger; put back what was there (pytest's own handlers too)."""
    root = logging.getLogger()
    ours = [h for h in root.handlers if getattr(h, "_service_handler", False)]
    level = root.level
    yield
    for handler in [h for h in root.handlers if getattr(h, "_service_handler", False)]:
        root.removeHandler(handler)
    for handler in ours:
        root.addHandler(handler)
    root.setLevel(level)


def lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_a_json_line_carries_the_fields_cloud_logging_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure(json_output=True)
    log.info("published %s", "evt_1", extra={"event_type": "invoice.paid"})

    [line] = lines(capsys)
    assert line["severity"] == "INFO"
    assert line["message"] == "published evt_1"
    assert line["logger"] == "tests.demo"
    assert line["event_type"] == "invoice.paid"
    assert line["time"].endswith("Z")
    assert datetime.fromisoformat(line["time"]).utcoffset() is not None
    assert logs.TRACE_KEY not in line


@pytest.mark.parametrize("level", ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
def test_severity_uses_cloud_logging_names(level: str, capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json_output=True, level="debug")
    log.log(logging.getLevelName(level), "something")

    assert [line["severity"] for line in lines(capsys)] == [level]


def test_level_filters_lower_severities(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json_output=True, level="WARNING")
    log.info("hidden")
    log.warning("shown")

    assert [line["message"] for line in lines(capsys)] == ["shown"]


def test_an_exception_goes_to_stack_trace(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json_output=True)
    try:
        raise ValueError("card declined")
    except ValueError:
        log.exception("handling failed")

    [line] = lines(capsys)
    assert line["severity"] == "ERROR"
    assert line["message"] == "handling failed"
    assert line["stack_trace"].startswith("Traceback (most recent call last):")
    assert "ValueError: card declined" in line["stack_trace"]


def test_an_error_without_traceback_is_a_reported_error_event(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("K_SERVICE", "emails")
    monkeypatch.setenv("K_REVISION", "emails-00042-abc")
    logs.configure(json_output=True, service=Settings(function_target="emails").service_context)
    log.error("resend refused evt_1")
    log.critical("dead-lettered evt_2")
    log.warning("retrying evt_3")

    error, critical, warning = lines(capsys)
    for line in (error, critical):
        assert line["@type"] == logs.REPORTED_ERROR_TYPE
        assert line["serviceContext"] == {"service": "emails", "version": "emails-00042-abc"}
    assert error["message"] == "resend refused evt_1"
    assert "@type" not in warning
    assert "serviceContext" not in warning


def test_the_service_context_falls_back_to_the_target_outside_cloud_run() -> None:
    assert Settings(function_target="access").service_context == {"service": "access"}


def test_an_exception_is_reported_with_its_service(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json_output=True, service={"service": "api"})
    try:
        raise ValueError("card declined")
    except ValueError:
        log.exception("handling failed")

    [line] = lines(capsys)
    assert line["stack_trace"].startswith("Traceback (most recent call last):")
    assert line["serviceContext"] == {"service": "api"}


def test_fields_named_like_secrets_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json_output=True)
    log.info("calling stripe", extra={"api_key": "sk_live_123", "webhook_secret": "whsec_9"})

    out = capsys.readouterr().out
    assert "sk_live_123" not in out
    assert "whsec_9" not in out
    assert json.loads(out)["api_key"] == "[redacted]"


def test_configure_is_idempotent(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json_output=False)
    logs.configure(json_output=True)
    log.info("once")

    assert len(lines(capsys)) == 1


def test_development_lines_are_readable_not_json(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json_output=False)
    log.warning("lead stored", extra={"lead_id": 7})

    [line] = capsys.readouterr().out.splitlines()
    assert "lead stored" in line
    assert "tests.demo" in line
    assert "lead_id=7" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def traced_app() -> flask.Flask:
    app = flask.Flask("traced")
    logs.init_app(app, project_id=PROJECT)

    @app.get("/")
    def index() -> str:
        log.info("inside the request")
        return "ok"

    @app.get("/boom")
    def boom() -> str:
        raise RuntimeError("boom")

    return app


@pytest.mark.parametrize(
    ("headers", "span", "sampled"),
    [
        ({"X-Cloud-Trace-Context": f"{TRACE_ID}/1;o=1"}, "0000000000000001", True),
        ({"X-Cloud-Trace-Context": f"{TRACE_ID}/12345;o=0"}, "0000000000003039", False),
        ({"X-Cloud-Trace-Context": f"{TRACE_ID}/{2**64 - 1};o=1"}, "ffffffffffffffff", True),
        ({"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"}, "00f067aa0ba902b7", True),
        ({"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-00"}, "00f067aa0ba902b7", False),
    ],
    ids=[
        "cloud-trace",
        "cloud-trace-unsampled",
        "cloud-trace-largest-span",
        "traceparent",
        "traceparent-unsampled",
    ],
)
def test_request_lines_carry_the_trace_from_either_header(
    headers: dict[str, str], span: str, sampled: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(json_output=True)
    traced_app().test_client().get("/", headers=headers)
    log.info("after the request")

    inside, after = lines(capsys)
    assert inside[logs.TRACE_KEY] == TRACE
    assert inside[logs.SPAN_KEY] == span
    assert inside[logs.SAMPLED_KEY] is sampled
    assert logs.TRACE_KEY not in after


def test_traceparent_wins_over_the_cloud_trace_header(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json_output=True)
    headers = {
        "traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01",
        "X-Cloud-Trace-Context": "105445aa7843bc8bf206b12000100000/1;o=1",
    }
    traced_app().test_client().get("/", headers=headers)

    assert lines(capsys)[0][logs.TRACE_KEY] == TRACE


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Cloud-Trace-Context": "not-a-trace"},
        {"traceparent": f"00-{'0' * 32}-00f067aa0ba902b7-01"},
        {"traceparent": "garbage"},
        # Past Python's 4300-digit limit for int(): once a 500 from every route.
        {"X-Cloud-Trace-Context": f"{TRACE_ID}/{'9' * 5000};o=1"},
    ],
    ids=["none", "malformed", "all-zero-trace", "garbage", "span-of-5000-digits"],
)
def test_requests_without_a_valid_trace_log_without_one(
    headers: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(json_output=True)
    traced_app().test_client().get("/", headers=headers)

    [line] = lines(capsys)
    assert logs.TRACE_KEY not in line
    assert logs.SPAN_KEY not in line


def test_an_unhandled_error_is_logged_with_its_trace(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json_output=True)
    client = traced_app().test_client()

    response = client.get("/boom", headers={"X-Cloud-Trace-Context": f"{TRACE_ID}/1;o=1"})

    assert response.status_code == 500
    [line] = lines(capsys)
    assert line["severity"] == "ERROR"
    assert line[logs.TRACE_KEY] == TRACE
    assert "RuntimeError: boom" in line["stack_trace"]
