"""ops/monitoring: the alert policies, log-based metrics and dashboard the deploy applies.

Each file is parsed as the API's own message type (google-cloud-monitoring, -dashboards and
-logging ship them), so an unknown field, a misspelt enum or a bad duration fails here and not
at deploy. apply.sh runs against a recording stand-in for gcloud, twice: it creates, then only
updates; every gcloud call it makes is checked against `gcloud --help`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.cloud.logging_v2.types import LogMetric
from google.cloud.monitoring_dashboard_v1.types import Dashboard
from google.cloud.monitoring_v3 import AlertPolicy, NotificationChannel
from google.protobuf import json_format
from google.protobuf.message import Message

from adapters.db.pool import Database
from adapters.mail.message import MailError, send_email
from adapters.mail.resend import ResendMailer
from dev.samples.catalogue import seed_demo_products
from runtime import logs
from tests.access.test_subscriber import completed, post_event
from tests.conftest import Api
from tests.deploy.test_cloudbuild import (
    Help,
    _command_words,
    _gcloud,
    _help,
    _problems,
    gcloud_calls,
)
from tests.fakes.resend import FakeResend
from tests.helpers import HANG_GUARD, create_user, stripe_event

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "ops" / "monitoring"
APPLY = MONITORING / "apply.sh"
METRICS = sorted((MONITORING / "metrics").glob("*.yaml"))
ALERTS = sorted((MONITORING / "alerts").glob("*.yaml"))
DASHBOARD = MONITORING / "dashboard.yaml"
PLACEHOLDER = re.compile(r"__[A-Z_]+__")
# Google's own metrics the files chart or alert on, with the labels they filter or group by
# (Cloud Monitoring's metrics list, "pubsub" and "run").
GOOGLE_METRICS = {
    "pubsub.googleapis.com/subscription/num_undelivered_messages": set(),
    "pubsub.googleapis.com/subscription/oldest_unacked_message_age": set(),
    "pubsub.googleapis.com/subscription/dead_letter_message_count": set(),
    "pubsub.googleapis.com/subscription/push_request_count": {"response_class", "response_code"},
    "run.googleapis.com/request_count": {"response_code", "response_code_class"},
    "run.googleapis.com/request_latencies": {"response_code", "response_code_class"},
    "run.googleapis.com/container/instance_count": {"state"},
    "run.googleapis.com/job/completed_execution_count": {"result"},
}
USER_METRIC = re.compile(r"^logging\.googleapis\.com/user/__SERVICE_PREFIX__-(?P<name>[a-z-]+)$")


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), path
    return data


def parsed(data: dict[str, Any], message: type[Message]) -> Message:
    """The file as the API's message; raises on anything the API would not accept."""
    return json_format.ParseDict(data, message(), ignore_unknown_fields=False)


def metric_names() -> dict[str, dict[str, Any]]:
    return {load(path)["name"]: load(path) for path in METRICS}


def filters() -> Iterator[tuple[str, str]]:
    """Every Monitoring filter in the alert policies and the dashboard."""
    for path in ALERTS:
        for condition in load(path)["conditions"]:
            threshold = condition["conditionThreshold"]
            yield path.name, threshold["filter"]
            if "denominatorFilter" in threshold:
                yield path.name, threshold["denominatorFilter"]
    for tile in load(DASHBOARD)["mosaicLayout"]["tiles"]:
        for data_set in tile["widget"]["xyChart"]["dataSets"]:
            yield tile["widget"]["title"], data_set["timeSeriesQuery"]["timeSeriesFilter"]["filter"]


@pytest.mark.parametrize("path", METRICS, ids=lambda p: p.stem)
def test_log_based_metrics_are_log_metric_messages(path: Path) -> None:
    data = load(path)
    metric = parsed(data, LogMetric.pb())
    assert data["name"] == f"__SERVICE_PREFIX__-{path.stem}"
    assert metric.filter.strip()
    labels = {label["key"] for label in data["metricDescriptor"].get("labels", [])}
    assert labels == set(data.get("labelExtractors", {}))


@pytest.mark.parametrize("path", ALERTS, ids=lambda p: p.stem)
def test_alert_policies_are_alert_policy_messages(path: Path) -> None:
    data = load(path)
    policy = parsed(data, AlertPolicy.pb())
    assert policy.display_name.startswith("__SERVICE_PREFIX__ ")
    assert policy.documentation.content
    assert policy.conditions
    # apply.sh adds the channel; a file naming one would point at another project's.
    assert "notificationChannels" not in data


def test_the_dashboard_is_a_dashboard_message() -> None:
    data = load(DASHBOARD)
    dashboard = parsed(data, Dashboard.pb())
    assert data["name"] == "projects/__PROJECT__/dashboards/__SERVICE_PREFIX__-pipeline"
    assert len(dashboard.mosaic_layout.tiles) >= 10
    for tile in data["mosaicLayout"]["tiles"]:
        assert tile["xPos"] + tile["width"] <= data["mosaicLayout"]["columns"]


def test_every_metric_charted_or_alerted_on_exists_with_its_labels() -> None:
    ours = metric_names()
    used: set[str] = set()
    for where, text in filters():
        [metric_type] = re.findall(r'metric\.type="([^"]+)"', text)
        labels = set(re.findall(r"metric\.labels\.([a-z_]+)", text))
        if match := USER_METRIC.match(metric_type):
            name = f"__SERVICE_PREFIX__-{match['name']}"
            assert name in ours, f"{where}: no log-based metric {name}"
            descriptor = ours[name]["metricDescriptor"]
            known = {label["key"] for label in descriptor.get("labels", [])}
            used.add(name)
        else:
            assert metric_type in GOOGLE_METRICS, f"{where}: unknown metric {metric_type}"
            known = GOOGLE_METRICS[metric_type]
        assert labels <= known, f"{where}: {metric_type} has no label {labels - known}"
    assert used == set(ours), f"log-based metrics no chart or alert uses: {set(ours) - used}"


def test_group_by_fields_name_labels_that_exist() -> None:
    ours = metric_names()
    for tile in load(DASHBOARD)["mosaicLayout"]["tiles"]:
        for data_set in tile["widget"]["xyChart"]["dataSets"]:
            query = data_set["timeSeriesQuery"]["timeSeriesFilter"]
            [metric_type] = re.findall(r'metric\.type="([^"]+)"', query["filter"])
            match = USER_METRIC.match(metric_type)
            descriptor = ours[f"__SERVICE_PREFIX__-{match['name']}"] if match else None
            known = (
                {label["key"] for label in descriptor["metricDescriptor"].get("labels", [])}
                if descriptor
                else GOOGLE_METRICS[metric_type]
            )
            for field in query["aggregation"].get("groupByFields", []):
                kind, _, label = field.rpartition(".")
                assert kind in {"metric.labels", "resource.labels"}, field
                if kind == "metric.labels":
                    assert label in known, f"{tile['widget']['title']}: no label {label}"


# A stand-in for gcloud: records each call, keeps what was created in a state folder (so a
# second run finds it), and copies every file it is given for the checks below.
FAKE_GCLOUD = r"""#!/usr/bin/env bash
set -euo pipefail
state="$FAKE_GCLOUD_STATE"
printf '%s\n' "$*" >> "$state/calls"
for arg in "$@"; do
  case "$arg" in
    --config-from-file=*|--policy-from-file=*)
      cp "${arg#*=}" "$state/files/$(ls "$state/files" | wc -l)-$(basename "${arg#*=}")" ;;
  esac
done
exists() { grep -qxF "$1" "$state/created" 2>/dev/null; }
case "$*" in
  "logging metrics describe "*)
    exists "metric $4" ;;
  "logging metrics create "*)
    echo "metric $4" >> "$state/created" ;;
  "alpha monitoring channels list "*)
    if exists channel; then echo "projects/p/notificationChannels/123"; fi ;;
  "alpha monitoring channels create "*)
    echo channel >> "$state/created"; echo "projects/p/notificationChannels/123" ;;
  "alpha monitoring policies list "*)
    name="$(printf '%s' "$*" | sed -E 's/.*displayName="([^"]*)".*/\1/')"
    if exists "policy $name"; then
      echo "projects/p/alertPolicies/$(echo "$name" | md5sum | cut -c1-8)"
    fi ;;
  "alpha monitoring policies create "*)
    file="${5#*=}"
    echo "policy $(sed -n 's/^displayName: //p' "$file")" >> "$state/created" ;;
  "monitoring dashboards describe "*)
    if exists dashboard; then echo "etag-1"; else exit 1; fi ;;
  "monitoring dashboards create "*)
    echo dashboard >> "$state/created" ;;
esac
"""


def run_apply(tmp_path: Path, *, alert_email: str) -> list[str]:
    """Run apply.sh against the stand-in; the gcloud calls of this run."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    (state / "files").mkdir(parents=True, exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "gcloud"
    fake.write_text(FAKE_GCLOUD)
    fake.chmod(0o755)
    calls = state / "calls"
    calls.write_text("")
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_GCLOUD_STATE": str(state),
        "PROJECT_ID": "shop-prod",
        "SERVICE_PREFIX": "shop",
        "TOPIC": "payment-events",
        "ALERT_EMAIL": alert_email,
    }
    done = subprocess.run(
        ["bash", str(APPLY)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=HANG_GUARD,
    )
    assert done.returncode == 0, done.stderr
    return calls.read_text().splitlines()


def verbs(calls: list[str]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for call in calls:
        words = call.split()
        verb = next(w for w in words if w in {"describe", "list", "create", "update"})
        counted[verb] = counted.get(verb, 0) + 1
    return counted


def test_apply_creates_everything_then_only_updates(tmp_path: Path) -> None:
    first = run_apply(tmp_path, alert_email="ops@example.com")
    second = run_apply(tmp_path, alert_email="ops@example.com")

    resources = len(METRICS) + len(ALERTS) + 1
    assert verbs(first)["create"] == resources + 1  # and the e-mail channel
    assert "update" not in verbs(first)
    assert "create" not in verbs(second)
    assert verbs(second)["update"] == resources
    created = [c for c in first if " create " in f" {c} " and "metrics" in c]
    assert sorted(c.split()[3] for c in created) == sorted(f"shop-{path.stem}" for path in METRICS)


def test_apply_renders_every_file_for_the_deployment(tmp_path: Path) -> None:
    run_apply(tmp_path, alert_email="ops@example.com")

    files = sorted((tmp_path / "state" / "files").iterdir())
    assert len(files) == len(METRICS) + len(ALERTS) + 1
    for path in files:
        text = path.read_text()
        assert not PLACEHOLDER.search(text), f"{path.name}: placeholder left"
        data = yaml.safe_load(text)
        if "conditions" in data:
            parsed(data, AlertPolicy.pb())
            assert data["notificationChannels"] == ["projects/p/notificationChannels/123"]
            assert data["displayName"].startswith("shop ")
        elif "mosaicLayout" in data:
            parsed(data, Dashboard.pb())
            assert data["name"] == "projects/shop-prod/dashboards/shop-pipeline"
        else:
            parsed(data, LogMetric.pb())
            assert 'jsonPayload.stage="' in data["filter"] or "httpRequest.status" in data["filter"]


def test_without_an_alert_email_no_channel_is_made_and_it_says_so(tmp_path: Path) -> None:
    calls = run_apply(tmp_path, alert_email="")

    assert not [c for c in calls if "channels" in c]
    for path in (tmp_path / "state" / "files").iterdir():
        assert "notificationChannels" not in path.read_text()


def test_the_channel_is_an_email_notification_channel() -> None:
    script = APPLY.read_text()
    content = re.search(r'content="(\{.*\})"', script)
    assert content
    text = (
        content[1]
        .replace('\\"', '"')
        .replace("$channel_name", "x")
        .replace("$ALERT_EMAIL", "a@b.c")
    )
    channel = json_format.MessageToDict(json_format.Parse(text, NotificationChannel.pb()()))
    assert channel["type"] == "email"
    assert channel["labels"] == {"email_address": "a@b.c"}


@pytest.fixture(scope="module")
def apply_help() -> Callable[[tuple[str, ...]], Help]:
    gcloud = _gcloud()
    words = {_command_words(call) for call in gcloud_calls(APPLY.read_text())}
    helps = {w: _help(gcloud, w) for w in words}
    return helps.__getitem__


def test_apply_calls_name_known_gcloud_commands_and_flags(
    apply_help: Callable[[tuple[str, ...]], Help],
) -> None:
    calls = list(gcloud_calls(APPLY.read_text()))
    problems = [
        f"gcloud {' '.join(call)[:90]}: {problem}"
        for call in calls
        for problem in _problems(call, apply_help(_command_words(call)))
    ]
    assert len(calls) >= 10
    assert not problems, "\n".join(problems)


# The log-based metrics count lines the code writes: a filter that no line matches counts
# nothing, silently. These read the JSON lines the service really writes and select them with
# the metrics' own filters (the part about the line; resource and log name are Cloud Run's).
_TERM = re.compile(r'^jsonPayload\.(?P<field>\w+)(?P<op>>=|<=|!=|=|<|>)(?P<value>"[^"]*"|\d+)$')


def _term_holds(line: dict[str, Any], term: str) -> bool:
    match = _TERM.match(term)
    assert match, f"the test cannot read the term {term!r}"
    field, op, raw = match["field"], match["op"], match["value"]
    value: object = raw.strip('"') if raw.startswith('"') else int(raw)
    if field not in line:
        return False
    have = line[field]
    if isinstance(value, int):
        if not isinstance(have, int):
            return False
        return {
            "=": have == value,
            "!=": have != value,
            ">=": have >= value,
            "<=": have <= value,
            "<": have < value,
            ">": have > value,
        }[op]
    return (str(have) == value) == (op == "=")


def selected_by(metric: str, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The JSON lines the named log-based metric's filter selects."""
    data = metric_names()[f"__SERVICE_PREFIX__-{metric}"]
    terms = [t.strip() for t in data["filter"].split(" AND ")]
    terms = [t for t in terms if t.startswith("jsonPayload.")]
    assert terms, f"{metric} selects nothing of the line"
    return [line for line in lines if all(_term_holds(line, t) for t in terms)]


@pytest.fixture
def json_lines(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """The service's JSON log lines written so far in this test."""
    root = logging.getLogger()
    before = list(root.handlers), root.level
    logs.configure(json_output=True)

    def read() -> list[dict[str, Any]]:
        out = capsys.readouterr().out
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    yield read
    for handler in [h for h in root.handlers if getattr(h, "_service_handler", False)]:
        root.removeHandler(handler)
    for handler in before[0]:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(before[1])


def test_an_events_life_is_counted_by_the_metrics_filters(
    api: Api, db: Database, json_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    seed_demo_products(db)
    user = create_user(db, "counted@example.com")
    body = stripe_event("checkout.session.completed", completed(user))
    event_id = json.loads(body)["id"]
    assert post_event(api, body).status_code == 200
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    first = json_lines()
    assert post_event(api, body).status_code == 200  # Stripe sends it again
    assert api.container.bus.wait_idle(HANG_GUARD)  # type: ignore[attr-defined]
    again = json_lines()

    [published] = selected_by("events-published", first)
    assert (published["event_type"], published["event_id"]) == (
        "checkout.session.completed",
        event_id,
    )
    applied = {line["event_id"]: line["outcome"] for line in selected_by("events-applied", first)}
    assert applied[event_id] == "granted"
    [sent] = selected_by("emails-sent", first)
    assert sent["email_kind"] == "purchase-confirmation"
    assert sent["event_id"] == f"granted_{json.loads(body)['data']['object']['id']}"
    assert selected_by("event-duplicates", first) == []
    duplicates = selected_by("event-duplicates", again)
    assert {(line["consumer"], line["event_id"]) for line in duplicates} >= {("access", event_id)}
    assert selected_by("emails-sent", again) == []


@pytest.mark.parametrize(
    ("status", "metric", "other"),
    [(422, "emails-refused", "resend-throttled"), (429, "resend-throttled", "emails-refused")],
)
def test_resend_answers_are_counted_by_what_they_mean(
    resend: FakeResend,
    json_lines: Callable[[], list[dict[str, Any]]],
    status: int,
    metric: str,
    other: str,
) -> None:
    answer = {"statusCode": status, "name": "x", "message": "refused or limited"}
    resend.scripted.extend([(status, answer, {"retry-after": "60"})] * 3)
    mailer = ResendMailer("re_test", resend.server.url, timeout=5, rate_per_second=1000)

    with pytest.raises(MailError):
        send_email(
            mailer,
            to="ada@example.com",
            subject="s",
            text="t",
            html="<p>h</p>",
            from_="Acme <hello@acme.example.com>",
            idempotency_key="evt_1/receipt",
        )

    lines = json_lines()
    [counted] = selected_by(metric, lines)
    assert counted["resend_status"] == status
    assert selected_by(other, lines) == []


def test_the_deploy_applies_the_monitoring_after_the_subscriptions() -> None:
    config = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    [step] = [s for s in config["steps"] if s["args"] == ["ops/monitoring/apply.sh"]]
    assert step["waitFor"] == ["subscriptions"]
    assert step["entrypoint"] == "bash"
    # The full image: alert policies and channels exist only in gcloud's alpha component.
    assert step["name"] == "gcr.io/google.com/cloudsdktool/cloud-sdk"
    env = dict(entry.split("=", 1) for entry in step["env"])
    assert env == {
        "PROJECT_ID": "$PROJECT_ID",
        "SERVICE_PREFIX": "${_SERVICE_PREFIX}",
        "TOPIC": "${_TOPIC}",
        "ALERT_EMAIL": "${_ALERT_EMAIL}",
    }
