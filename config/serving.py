"""Which target a process runs and how: `bin/serve`'s gunicorn, Cloud Run's names, `make run`."""

from __future__ import annotations

from pydantic import Field, field_validator

from config.checks import Group
from config.environment import Environment

# The subscriber targets: each a Cloud Run service fed by a push subscription of its own (the
# in-process bus, `bin/serve` and the deploy take their names from here, through
# `runtime.targets.TARGETS`). Here because FUNCTION_TARGET is checked against it, and the settings
# import nothing of the project.
TARGETS: tuple[str, ...] = ("access", "emails")


class ServingSettings(Environment):
    port: int = Field(default=8080, ge=1, le=65535)
    # Interface `make run` listens on: loopback unless told otherwise.
    dev_host: str = "127.0.0.1"

    # How `bin/serve` runs: which target, and gunicorn's processes and threads per instance.
    # One process per vCPU (Cloud Run's instances have one) holding all of the instance's
    # requests: the api then groups the events that reach the instance together into one message,
    # and access applies the pushes it holds in one transaction (bench/README.md).
    function_target: str = "api"
    web_concurrency: int = Field(default=1, ge=1, le=64)
    gunicorn_threads: int = Field(default=16, ge=1, le=256)
    # Set by Cloud Run on every instance: the service and revision that wrote a log line.
    k_service: str | None = None
    k_revision: str | None = None

    @field_validator("function_target")
    @classmethod
    def _known_target(cls, value: str) -> str:
        targets = ("api", *TARGETS)
        if value not in targets:
            raise ValueError(f"FUNCTION_TARGET must be one of {', '.join(targets)}, not {value!r}")
        return value

    @property
    def json_logs(self) -> bool:
        """One JSON object a line, as Cloud Logging reads them: in production, and wherever
        Cloud Run runs the service (it sets K_SERVICE), whatever APP_ENV says."""
        return self.is_production or self.k_service is not None

    @property
    def service_context(self) -> dict[str, str]:
        """Error Reporting's service context: Cloud Run's service and revision, else the target."""
        context = {"service": self.k_service or self.function_target}
        if self.k_revision:
            context["version"] = self.k_revision
        return context


GROUP = Group(fields=ServingSettings)
