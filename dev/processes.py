"""The service's targets as separate processes, started with `bin/serve` as the image does."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from config import Settings
from dev.pubsub_emulator import free_port, stop_group

ROOT = Path(__file__).resolve().parents[1]
# Loopback only: an HTTP(S)_PROXY in the environment must not see these requests.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def environment(settings: Settings) -> dict[str, str]:
    """The environment variables that give another process these settings."""
    env = {}
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if value is not None:
            env[name.upper()] = str(value)
    return env


@dataclass
class Target:
    """One running target (`api`, `access` or `emails`) on 127.0.0.1:`port`."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answers(self) -> bool:
        try:
            with _DIRECT.open(self.url + "/healthz", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True  # it answered, even if not with 200
        except (urllib.error.URLError, OSError):
            return False

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        stop_group(self.process)


def start_target(
    name: str, settings: Settings, *, log: Path, port: int | None = None, timeout: float = 60
) -> Target:
    """`bin/serve` for one target with `settings`; returns once it answers HTTP."""
    chosen = port or free_port()
    env = {**_inherited(), **environment(settings)}
    env |= {"FUNCTION_TARGET": name, "PORT": str(chosen), "WEB_CONCURRENCY": "1"}
    return spawn(
        name, [str(ROOT / "bin" / "serve")], env=env, port=chosen, log=log, timeout=timeout
    )


def spawn(
    name: str, command: list[str], *, env: dict[str, str], port: int, log: Path, timeout: float = 60
) -> Target:
    """Run `command` in its own process group, output to `log`; returns once it answers HTTP."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    target = Target(name=name, port=port, process=process, log=log)
    deadline = time.monotonic() + timeout
    while not target.answers():
        if process.poll() is not None or time.monotonic() > deadline:
            target.stop()
            raise RuntimeError(f"{name} did not start:\n{target.output()[-3000:]}")
        time.sleep(0.05)
    return target


def _inherited() -> dict[str, str]:
    """This process's environment without any setting of the service's (those come explicitly)."""
    names = {name.upper() for name in Settings.model_fields}
    return {key: value for key, value in os.environ.items() if key not in names}
