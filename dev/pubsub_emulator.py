"""The Pub/Sub emulator as a child process, for `make run`, the tests and the benchmark.

`gcloud beta emulators pubsub start` is a Python wrapper that runs a Java server as its own
child: killing the wrapper alone leaves the Java server holding the port. The emulator runs in
a process group of its own and is stopped by signalling the whole group.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


class EmulatorUnavailable(RuntimeError):
    """The emulator could not be started (gcloud or its emulator component missing, or a crash)."""


@dataclass
class Emulator:
    """A running emulator on 127.0.0.1:`port`; `stop()` ends it and everything it started."""

    project: str
    port: int
    data_dir: Path
    process: subprocess.Popen[bytes]

    @property
    def host(self) -> str:
        """The value PUBSUB_EMULATOR_HOST takes."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "emulator.log"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the wrapper and the Java server; leave no process of the group behind."""
        # SIGKILL straight away: its state lives in memory only, and the JVM takes over a second
        # to honour SIGTERM.
        stop_group(self.process, timeout=timeout, graceful=False)
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        """The end of the emulator's output, for error messages."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def gcloud() -> str | None:
    """The gcloud executable, when the Google Cloud CLI is installed."""
    return shutil.which("gcloud")


def start(
    *, project: str = "local-project", port: int | None = None, timeout: float = 60
) -> Emulator:
    """Start an emulator on a free (or the given) loopback port; returns once it answers."""
    executable = gcloud()
    if executable is None:
        raise EmulatorUnavailable(
            "gcloud is not installed (Google Cloud CLI, with pubsub-emulator)"
        )
    data_dir = Path(tempfile.mkdtemp(prefix="pubsub-emulator-"))
    chosen = port or free_port()
    command = [
        executable,
        *("beta", "emulators", "pubsub", "start"),
        f"--project={project}",
        f"--host-port=127.0.0.1:{chosen}",
        f"--data-dir={data_dir}",
        "--quiet",
    ]
    with (data_dir / "emulator.log").open("wb") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    emulator = Emulator(project=project, port=chosen, data_dir=data_dir, process=process)
    try:
        _wait_until_ready(emulator, timeout)
    except BaseException:
        emulator.stop()
        raise
    return emulator


@contextlib.contextmanager
def running(*, project: str = "local-project", port: int | None = None) -> Iterator[Emulator]:
    """An emulator for the duration of the block."""
    emulator = start(project=project, port=port)
    try:
        yield emulator
    finally:
        emulator.stop()


def _wait_until_ready(emulator: Emulator, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not answers(emulator.host):
        if emulator.process.poll() is not None:
            raise EmulatorUnavailable(f"the emulator exited:\n{emulator.log_tail()}")
        if time.monotonic() > deadline:
            raise EmulatorUnavailable(f"no answer within {timeout}s:\n{emulator.log_tail()}")
        time.sleep(0.05)


def answers(host: str) -> bool:
    """Whether an emulator answers its HTTP health check (`GET /` -> `Ok`) at host:port."""
    try:
        with _DIRECT.open(f"http://{host}/", timeout=1) as response:
            return bool(response.status == 200 and response.read(2) == b"Ok")
    except (urllib.error.URLError, OSError):
        return False


# Loopback only: an HTTP(S)_PROXY in the environment must not see these requests.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop_group(
    process: subprocess.Popen[bytes], *, timeout: float = 10.0, graceful: bool = True
) -> None:
    """SIGTERM a child started with `start_new_session=True` and its whole group; SIGKILL
    what is left after `timeout`; return once no process of the group remains."""
    group = process.pid  # a session leader's process group id is its pid
    signals = (signal.SIGTERM, signal.SIGKILL) if graceful else (signal.SIGKILL,)
    for sig in signals:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, sig)
        if _group_gone(process, timeout):
            return
    raise RuntimeError(f"process group {group} survived SIGKILL")


def _group_gone(process: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        process.poll()  # reap our own child: a zombie still counts as a member of the group
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False
