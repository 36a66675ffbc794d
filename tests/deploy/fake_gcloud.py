"""A recording stand-in of the `gcloud` commands cloudbuild.yaml's deploy and check-private
steps run, keeping Cloud Run's services between builds as Cloud Run keeps them.

Run as an executable on PATH (`gcloud`): each call's argv is appended to `calls.jsonl` in
FAKE_GCLOUD_DIR, the services live in `services.json` there. A service is kept in the shape
`gcloud run services describe --format=json` prints (Cloud Run's Knative `Service`): its
variables under spec.template.spec.containers[0].env (a secret as `valueFrom`), its ingress and
invoker check as `metadata.annotations`, its revision tags under status.traffic, and its IAM
policy beside it. What `gcloud run deploy` does to them follows its reference: `--env-vars-file`
and `--set-secrets` replace every variable and every secret; `--ingress`,
`--[no-]invoker-iam-check` and `--[no-]allow-unauthenticated` (which adds or removes `allUsers`
as invoker) change only what they name; without them the service keeps what it had.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

INGRESS = "run.googleapis.com/ingress"
INVOKER_IAM_DISABLED = "run.googleapis.com/invoker-iam-disabled"
INVOKER = "roles/run.invoker"


def flags(args: list[str]) -> dict[str, str | None]:
    """`--name=value` and `--switch` (None) of a call."""
    found: dict[str, str | None] = {}
    for arg in args:
        if arg.startswith("--"):
            name, sep, value = arg.partition("=")
            found[name] = value if sep else None
    return found


def new_service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {"name": name, "annotations": {INGRESS: "all"}},
        "spec": {"template": {"spec": {"containers": [{"env": []}]}}},
        "status": {"url": f"https://{name}.run.invalid", "traffic": []},
        "iam": {"bindings": [], "etag": "BwY="},
    }


def env_of(service: dict[str, Any]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = service["spec"]["template"]["spec"]["containers"][0]["env"]
    return env


def deploy(service: dict[str, Any], given: dict[str, str | None]) -> None:
    annotations = service["metadata"]["annotations"]
    env = env_of(service)
    if "--env-vars-file" in given:
        loaded = yaml.safe_load(Path(str(given["--env-vars-file"])).read_text()) or {}
        plain = [{"name": k, "value": str(v)} for k, v in loaded.items()]
        env[:] = plain + [e for e in env if "valueFrom" in e]
    if "--set-secrets" in given:
        secrets = []
        for pair in str(given["--set-secrets"]).split(","):
            name, _, ref = pair.partition("=")
            secret, _, version = ref.partition(":")
            key = {"name": version or "latest", "key": secret}
            secrets.append({"name": name, "valueFrom": {"secretKeyRef": key}})
        env[:] = [e for e in env if "value" in e] + secrets
    if "--ingress" in given:
        annotations[INGRESS] = given["--ingress"]
    if "--no-invoker-iam-check" in given:
        annotations[INVOKER_IAM_DISABLED] = "true"
    if "--invoker-iam-check" in given:
        annotations.pop(INVOKER_IAM_DISABLED, None)
    if "--allow-unauthenticated" in given:
        bind(service, "allUsers", INVOKER)
    if "--no-allow-unauthenticated" in given:
        for binding in service["iam"]["bindings"]:
            if binding["role"] == INVOKER and "allUsers" in binding["members"]:
                binding["members"].remove("allUsers")
    tag = given.get("--tag")
    if tag:
        traffic = [t for t in service["status"]["traffic"] if t.get("tag") != tag]
        name = service["metadata"]["name"]
        traffic.append({"tag": tag, "url": f"https://{tag}---{name}.run.invalid", "percent": 0})
        service["status"]["traffic"] = traffic


def bind(service: dict[str, Any], member: str, role: str) -> None:
    bindings = service["iam"]["bindings"]
    for binding in bindings:
        if binding["role"] == role:
            if member not in binding["members"]:
                binding["members"].append(member)
            return
    bindings.append({"role": role, "members": [member]})


def main(args: list[str]) -> int:
    home = Path(os.environ["FAKE_GCLOUD_DIR"])
    with (home / "calls.jsonl").open("a") as calls:
        calls.write(json.dumps(args) + "\n")
    state = home / "services.json"
    services: dict[str, dict[str, Any]] = json.loads(state.read_text()) if state.exists() else {}
    words = [a for a in args if not a.startswith("--")]
    given = flags(args)
    status = 0
    match words[:3]:
        case ["run", "deploy", name]:
            deploy(services.setdefault(name, new_service(name)), given)
        case ["run", "services", "describe"] | ["run", "services", "get-iam-policy"]:
            found = services.get(words[3])
            if found is None:
                print(f"ERROR: Cannot find service [{words[3]}]", file=sys.stderr)
                return 1
            if words[2] == "get-iam-policy":
                print(json.dumps(found["iam"]))
            else:
                described = {k: v for k, v in found.items() if k != "iam"}
                print(json.dumps(described) if given.get("--format") == "json" else "")
        case ["run", "services", "add-iam-policy-binding"]:
            bind(services[words[3]], str(given["--member"]), str(given["--role"]))
        case ["scheduler", "jobs", "describe"]:
            status = 1  # no job yet: the deploy creates it
        case _:
            pass  # recorded only (traffic, jobs, the scheduler's job, the instance limit)
    state.write_text(json.dumps(services, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
