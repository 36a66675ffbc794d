"""The Pub/Sub setup cloudbuild.yaml gives production, read from cloudbuild.yaml itself.

cloudbuild.yaml is the one definition: its `provision` and `subscriptions` scripts are run by
bash in a dry run, where `gcloud` is a shell function that records its arguments (and answers
`run services describe` with a placeholder URL per service). The recorded `gcloud pubsub` calls
are read into a `Topology`; a flag this reader does not know fails the test, so the emulator
setup cannot silently fall behind what production gets. The container test builds the
topology on the emulator with `ensure_topology`, then reads it back and compares.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from google.pubsub_v1.types import Subscription as SubscriptionProto

from adapters.bus.topology import PushPolicy
from runtime.consumers import subscription_of
from tests.helpers import HANG_GUARD

ROOT = Path(__file__).resolve().parents[2]
CLOUDBUILD = ROOT / "cloudbuild.yaml"
PROJECT_NUMBER = "123456789012"
SERVICE_URL = "https://run.invalid/"  # what `gcloud run services describe` answers, + service
_DOLLAR = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<bare>\w+))")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

# `gcloud`, recorded: each call's arguments separated by \x1f, calls by \x1e.
_RECORDER = r"""
# Each call is recorded in one write: a pipeline runs two stubs at once, and records written in
# pieces would interleave.
record() {
  local line
  line="$(printf '%s\x1f' "$@")"
  printf '%s\x1e' "$line" >> "$GCLOUD_CALLS"
}
# $GCLOUD_EXISTING: subscriptions (one name a line) that exist before the build; nothing else does.
gcloud() {
  record "$@"
  case "$1 $2 $3" in
    "pubsub subscriptions describe") grep -qx -- "$4" "$GCLOUD_EXISTING" ;;
    "pubsub topics describe" | "pubsub snapshots describe") return 1 ;;
    "pubsub subscriptions list") cat "$GCLOUD_EXISTING" ;;
    "run services describe") echo "__SERVICE_URL__$4" ;;
  esac
}
# No network in a dry run: python3 (the revision URL's lookup, the smoke test, reading what a
# service has now) is recorded; the revision URL's lookup answers a placeholder URL.
python3() {
  record python3 "$@"
  cat > /dev/null
  case "$*" in *traffic*) echo "https://tagged.run.invalid" ;; esac
}
"""


@dataclass(frozen=True)
class Subscription:
    """One subscription's settings, as gcloud's flags state them."""

    name: str
    topic: str
    push_endpoint: str | None = None
    push_service_account: str | None = None
    push_audience: str | None = None
    ack_deadline: int = 10
    min_retry_delay: float | None = None
    max_retry_delay: float | None = None
    dead_letter_topic: str | None = None
    max_delivery_attempts: int | None = None
    never_expires: bool = False
    retain_acked_messages: bool = False
    retention: float | None = None
    message_filter: str | None = None

    def flag(self, name: str, value: str | None) -> Subscription:
        """This subscription with one more `gcloud pubsub subscriptions create/update` flag."""
        text = value or ""
        match name:
            case "--topic":
                return replace(self, topic=text)
            case "--push-endpoint":
                return replace(self, push_endpoint=text)
            case "--push-auth-service-account":
                return replace(self, push_service_account=text)
            case "--push-auth-token-audience":
                return replace(self, push_audience=text)
            case "--ack-deadline":
                return replace(self, ack_deadline=int(text))
            case "--min-retry-delay":
                return replace(self, min_retry_delay=seconds(text))
            case "--max-retry-delay":
                return replace(self, max_retry_delay=seconds(text))
            case "--dead-letter-topic":
                return replace(self, dead_letter_topic=text)
            case "--max-delivery-attempts":
                return replace(self, max_delivery_attempts=int(text))
            case "--expiration-period" if text == "never":
                return replace(self, never_expires=True)
            case "--retain-acked-messages" if value is None:
                return replace(self, retain_acked_messages=True)
            case "--message-retention-duration":
                return replace(self, retention=seconds(text))
            case "--message-filter":
                return replace(self, message_filter=text)
        raise ValueError(
            f"cloudbuild.yaml sets {name}={value} on subscription {self.name}; teach"
            " tests/deploy/topology.py and adapters/bus/topology.py to reproduce it"
        )

    @classmethod
    def from_proto(cls, sub: SubscriptionProto) -> Subscription:
        """What the emulator (or Pub/Sub) holds, in the same terms."""
        pb = sub._pb
        retry, dead = pb.retry_policy, pb.dead_letter_policy
        has_retry = pb.HasField("retry_policy")
        return cls(
            name=pb.name.rsplit("/", 1)[-1],
            topic=pb.topic.rsplit("/", 1)[-1],
            push_endpoint=pb.push_config.push_endpoint or None,
            push_service_account=pb.push_config.oidc_token.service_account_email or None,
            push_audience=pb.push_config.oidc_token.audience or None,
            ack_deadline=pb.ack_deadline_seconds,
            min_retry_delay=retry.minimum_backoff.ToTimedelta().total_seconds()
            if has_retry
            else None,
            max_retry_delay=retry.maximum_backoff.ToTimedelta().total_seconds()
            if has_retry
            else None,
            dead_letter_topic=dead.dead_letter_topic.rsplit("/", 1)[-1] or None,
            max_delivery_attempts=dead.max_delivery_attempts or None,
            never_expires=pb.HasField("expiration_policy")
            and not pb.expiration_policy.HasField("ttl"),
            retain_acked_messages=pb.retain_acked_messages,
            retention=pb.message_retention_duration.ToTimedelta().total_seconds()
            if pb.HasField("message_retention_duration")
            else None,
            message_filter=pb.filter or None,
        )


@dataclass(frozen=True)
class Topology:
    """Topics, and subscriptions by name; `services` maps a push endpoint to its target."""

    topics: frozenset[str]
    subscriptions: dict[str, Subscription]
    services: dict[str, str] = field(default_factory=dict)
    # A topic's own message retention, where set (seconds).
    topic_retention: dict[str, float] = field(default_factory=dict)

    @property
    def push(self) -> dict[str, Subscription]:
        """The push subscriptions, by the subscriber (target) they feed."""
        return {
            self.services[sub.push_endpoint]: sub
            for sub in self.subscriptions.values()
            if sub.push_endpoint
        }

    @property
    def topic(self) -> str:
        [topic] = {sub.topic for sub in self.push.values()}
        return topic

    @property
    def dead_letter_topic(self) -> str:
        [dead] = {sub.dead_letter_topic for sub in self.push.values()}
        assert dead is not None, "push subscriptions dead-letter"
        return dead

    @property
    def push_service_account(self) -> str | None:
        [account] = {sub.push_service_account for sub in self.push.values()}
        return account

    @property
    def push_audiences(self) -> dict[str, str]:
        """The OIDC audience each target's push tokens carry (the subscriber checks it)."""
        return {t: sub.push_audience for t, sub in self.push.items() if sub.push_audience}

    def policy(self) -> PushPolicy:
        """The retry and retention settings, the same for every push subscription."""
        policies = {
            PushPolicy(
                ack_deadline=sub.ack_deadline,
                min_backoff=sub.min_retry_delay or 0,
                max_backoff=sub.max_retry_delay or 0,
                # Subscribers may differ here (DELIVERY_ATTEMPTS): compared on their own.
                max_delivery_attempts=PushPolicy().max_delivery_attempts,
                retention=sub.retention or 0,
            )
            for sub in self.push.values()
        }
        [policy] = policies
        return policy

    def delivery_attempts(self) -> dict[str, int]:
        return {t: sub.max_delivery_attempts or 0 for t, sub in self.push.items()}

    def message_filters(self) -> dict[str, str | None]:
        return {t: sub.message_filter for t, sub in self.push.items()}

    def with_endpoints(self, urls: dict[str, str]) -> Topology:
        """The same topology with each target's push endpoint replaced by `urls[target]`."""
        endpoint_of = {target: sub.push_endpoint for target, sub in self.push.items()}
        subscriptions = dict(self.subscriptions)
        for target, url in urls.items():
            sub = self.push[target]
            subscriptions[sub.name] = replace(sub, push_endpoint=url)
        services = {url: target for target, url in urls.items()}
        services |= {e: t for t, e in endpoint_of.items() if t not in urls and e}
        return Topology(self.topics, subscriptions, services)


def seconds(text: str) -> float:
    """A gcloud duration (`10s`, `600s`, `7d`) in seconds."""
    match = re.fullmatch(r"(\d+)([smhd])", text)
    if match is None:
        raise ValueError(f"unsupported duration {text!r}")
    return float(int(match[1]) * _UNITS[match[2]])


def cloudbuild(project: str) -> Topology:
    """The topology cloudbuild.yaml's scripts create in `project` (a dry run, no network)."""
    return _read(provisioning(project), prefix=_prefix())


def provisioning(
    project: str, *, existing: tuple[str, ...] = (), filters: str | None = None
) -> list[list[str]]:
    """The `gcloud` calls of the provision and subscriptions steps, where the subscriptions
    `existing` are there already and the filters step wrote `filters` (this checkout's)."""
    scripts, _ = rendered(project)
    calls = []
    workspace = {"filters": filters_written() if filters is None else filters}
    for step_id in ("provision", "subscriptions"):
        with dry_run(scripts[step_id], workspace=workspace, existing=existing) as found:
            calls += found
    return calls


def _prefix() -> str:
    _, values = rendered("local-project")
    return _render(values["_SERVICE_PREFIX"], values)


@cache
def filters_written() -> str:
    """What the `filters` step leaves in /workspace/filters: its script, run in this checkout
    (the image's /app) with this interpreter standing in for the image's."""
    scripts, _ = rendered("local-project")
    script = scripts["filters"].replace("/app/.venv/bin/python", sys.executable)
    with tempfile.TemporaryDirectory(prefix="cloudbuild-") as scratch:
        subprocess.run(
            ["bash", "-c", script.replace("/workspace/", f"{scratch}/")],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "HOME": scratch},
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
            check=True,
        )
        return (Path(scratch) / "filters").read_text()


def rendered(
    project: str, substitutions: dict[str, str] | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """Each bash step's script with Cloud Build's substitutions (the defaults, then
    `substitutions` as `--substitutions` gives them) applied, after the step's `env` exported
    as Cloud Build sets it, and the substitutions' values."""
    config: dict[str, Any] = yaml.safe_load(CLOUDBUILD.read_text())
    values = {
        **{name: str(value) for name, value in config["substitutions"].items()},
        **(substitutions or {}),
        "PROJECT_ID": project,
        "PROJECT_NUMBER": PROJECT_NUMBER,
        "BUILD_ID": "dry-run",
        "COMMIT_SHA": "",  # empty for `gcloud builds submit` from a checkout
    }
    scripts = {
        step["id"]: "".join(
            f"export {shlex.quote(_render(entry, values))}\n" for entry in step.get("env", [])
        )
        + _render(step["args"][1], values)
        for step in config["steps"]
        if step.get("entrypoint") == "bash" and step["args"][0] == "-c"
    }
    return scripts, values


def _render(text: str, values: dict[str, str]) -> str:
    """Cloud Build's substitutions, applied as Cloud Build applies them (recursively)."""

    def one(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        return _render(values[match["braced"] or match["bare"]], values)

    return _DOLLAR.sub(one, text)


@contextmanager
def dry_run(
    script: str,
    *,
    env: dict[str, str] | None = None,
    workspace: dict[str, str] | None = None,
    existing: tuple[str, ...] = (),
) -> Iterator[list[list[str]]]:
    """The `gcloud` calls of a rendered script; the files it writes to /workspace (where
    `workspace` holds those earlier steps left) stay readable until the block ends."""
    with tempfile.TemporaryDirectory(prefix="cloudbuild-") as scratch:
        for name, text in (workspace or {}).items():
            (Path(scratch) / name).write_text(text)
        calls = Path(scratch) / "calls"
        calls.touch()
        there = Path(scratch) / "existing"
        there.write_text("".join(f"{name}\n" for name in existing))
        recorder = _RECORDER.replace("__SERVICE_URL__", SERVICE_URL)
        # Steps share /workspace in Cloud Build; here, a scratch folder.
        body = script.replace("/workspace/", f"{scratch}/")
        result = subprocess.run(
            ["bash", "-c", recorder + body],
            env={
                **(env or {}),
                "GCLOUD_CALLS": str(calls),
                "GCLOUD_EXISTING": str(there),
                "PATH": "/usr/bin:/bin",
            },
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"dry run of cloudbuild.yaml failed:\n{result.stderr}")
        records = calls.read_text().split("\x1e")
        yield [record.split("\x1f")[:-1] for record in records if record]


def _read(calls: list[list[str]], *, prefix: str) -> Topology:
    topics: set[str] = set()
    retention: dict[str, float] = {}
    subscriptions: dict[str, Subscription] = {}
    for call in calls:
        if call[:1] != ["pubsub"] or call[2:3] in (["describe"], ["add-iam-policy-binding"]):
            continue
        if call[1:3] == ["subscriptions", "list"] or call[1] == "snapshots":
            continue  # what exists; a snapshot holds a backlog, not settings
        group, verb, name, *flags = call[1:]
        if (group, verb) == ("subscriptions", "delete"):
            subscriptions.pop(name, None)
            continue
        if (group, verb) == ("subscriptions", "seek"):
            continue  # the acknowledgement state, not a setting
        if (group, verb) == ("topics", "create"):
            topics.add(name)
            continue
        if (group, verb) == ("topics", "update"):
            [flag] = flags
            key, _, value = flag.partition("=")
            if key != "--message-retention-duration":
                raise ValueError(f"cloudbuild.yaml updates a topic with {flag}: read it here")
            retention[name] = seconds(value)
            continue
        if group != "subscriptions" or verb not in ("create", "update"):
            raise ValueError(f"cloudbuild.yaml runs `gcloud pubsub {group} {verb}`: read it here")
        sub = subscriptions.get(name, Subscription(name=name, topic=""))
        for flag in flags:
            key, _, value = flag.partition("=")
            sub = sub.flag(key, value if "=" in flag else None)
        subscriptions[name] = sub
    services = {
        f"{SERVICE_URL}{prefix}-{target}": target
        for target in ("api", "access", "emails")  # the image's targets (bin/serve)
    }
    return Topology(frozenset(topics), subscriptions, services, retention)


def check_names(topology: Topology) -> None:
    """Production's names are the ones `ensure_topology` gives (topic-subscriber and its
    filter's version, -dead-letter)."""
    for target, sub in topology.push.items():
        assert sub.name == subscription_of(topology.topic, target)
    assert topology.dead_letter_topic == f"{topology.topic}-dead-letter"
