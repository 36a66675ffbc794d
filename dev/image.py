"""`make image`: build the Dockerfile with Docker where a daemon runs, else with podman.

Where the Dockerfile's base (`python:3.11-slim`, by digest) cannot be pulled (no registry of
container images reachable, as on the machines this project is developed on), podman builds on a
local stand-in for it: Debian bookworm's own Python 3.11 from `debootstrap`, imported as
`localhost/python-standin`. Its packages come from Debian's archive as it was on `SNAPSHOT`
(snapshot.debian.org), so the stand-in is the same bytes for every build; where that archive is
out of reach, from today's mirror, and the build says so. What is
missing (podman, runc, debootstrap) is installed from Debian's packages; everything already
there is reused, so a second run costs only the (cached) build.

    python3 dev/image.py [--tag saas-backend:local]

Standard library only: it runs before any dependency is installed. The container test
(tests/deploy/) builds with the same functions and runs containers with `Engine.run_options`.
Environment: PYTHON_IMAGE overrides the base (with podman, `PYTHON_IMAGE=python:3.11-slim`
pulls the real one); IMAGE_ENGINE=docker|podman overrides the choice of engine.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAG = "saas-backend:local"
REAL_BASE = "python:3.11-slim"
STANDIN = "localhost/python-standin:3.11-bookworm"
SUITE = "bookworm"
# The day of Debian's archive the stand-in is built from; a newer one is a deliberate change.
SNAPSHOT = "20261201T000000Z"
SNAPSHOT_MIRROR = f"http://snapshot.debian.org/archive/debian/{SNAPSHOT}"
MIRROR = "http://deb.debian.org/debian"
CACHE = ROOT / ".data" / "image"
# The machine's CA bundle, copied into the stand-in: downloads may pass a TLS-inspecting proxy.
STANDIN_CA = "/etc/ssl/certs/host-ca-bundle.crt"
# Podman's default limits exceed what some machines allow (hard limits); crun refuses hybrid
# cgroups, runc does not.
PODMAN_LIMITS = ("--ulimit=nofile=10000:10000", "--ulimit=nproc=1000:1000")


class ImageError(RuntimeError):
    """The image cannot be built here (no engine, no way to install one, a failed build)."""


@dataclass(frozen=True)
class Engine:
    """A container engine: `command` prefixes every call; `run_options` go with every `run`
    (the host's network, so that containers reach loopback services; podman: limits too)."""

    name: str
    command: tuple[str, ...]
    run_options: tuple[str, ...] = ()

    def __call__(
        self, *args: str, check: bool = True, capture: bool = False, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*self.command, *args],
            check=False,
            text=True,
            capture_output=capture,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            detail = (result.stderr or "").strip()[-2000:] if capture else ""
            raise ImageError(f"`{' '.join([*self.command, *args])}` failed\n{detail}".strip())
        return result

    def image_exists(self, name: str) -> bool:
        if self.name == "podman":
            return self("image", "exists", name, check=False).returncode == 0
        return self("image", "inspect", name, check=False, capture=True).returncode == 0


def log(message: str) -> None:
    print(f"image: {message}", file=sys.stderr, flush=True)


def docker_daemon() -> bool:
    """Whether a Docker daemon answers (the client alone is not enough)."""
    if shutil.which("docker") is None:
        return False
    try:
        result = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == 0


def ensure_packages(commands: dict[str, str]) -> None:
    """Install from Debian the packages whose command (key) is missing; nothing when all exist."""
    missing = sorted({package for command, package in commands.items() if not _which(command)})
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ImageError(f"install these Debian packages first (as root): {' '.join(missing)}")
    log(f"installing {' '.join(missing)} from Debian's packages")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in (["update", "-qq"], ["install", "-y", "-qq", "--no-install-recommends", *missing]):
        result = subprocess.run(["apt-get", *args], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise ImageError(f"apt-get {' '.join(args)} failed:\n{result.stderr[-2000:]}")


def _which(command: str) -> str | None:
    # runc and debootstrap live in /usr/sbin, which a non-login PATH may lack.
    return shutil.which(command) or shutil.which(command, path="/usr/sbin:/sbin")


def engine(*, install: bool = True) -> Engine:
    """Docker when its daemon answers, else podman (installed from Debian when missing)."""
    wanted = os.environ.get("IMAGE_ENGINE", "")
    if wanted == "docker" or (not wanted and docker_daemon()):
        return Engine("docker", ("docker",), ("--network=host",))
    if install:
        ensure_packages({"podman": "podman", "runc": "runc"})
    podman, runc = _which("podman"), _which("runc")
    if podman is None or runc is None:
        raise ImageError("neither a Docker daemon nor podman with runc is available")
    return Engine("podman", (podman, f"--runtime={runc}"), (*PODMAN_LIMITS, "--network=host"))


def ca_bundle() -> Path:
    """The CA bundle this machine's own tools trust (it may include a proxy's CA)."""
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE"):
        value = os.environ.get(name)
        if value and Path(value).is_file():
            return Path(value)
    return Path("/etc/ssl/certs/ca-certificates.crt")


def pinned_base() -> str:
    """The Dockerfile's own base: `python:3.11-slim@sha256:...` (its PYTHON_IMAGE default)."""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("ARG PYTHON_IMAGE="):
            return line.split("=", 1)[1].strip()
    raise ImageError("the Dockerfile declares no ARG PYTHON_IMAGE default")


def base_image(eng: Engine) -> str:
    """The image the Dockerfile builds FROM (its PYTHON_IMAGE argument)."""
    if chosen := os.environ.get("PYTHON_IMAGE"):
        return chosen
    pinned = pinned_base()
    if eng.name == "docker" or eng.image_exists(f"docker.io/library/{pinned}"):
        return pinned
    ensure_standin(eng)
    return STANDIN


def ensure_standin(eng: Engine) -> None:
    """`localhost/python-standin`: bookworm's Python 3.11 with pip, venv and the CA bundle."""
    if eng.image_exists(STANDIN):
        return
    tarball = CACHE / f"python-standin-{SUITE}.tar"
    if not tarball.is_file():
        _debootstrap(tarball)
    log(f"importing {tarball.relative_to(ROOT)} as {STANDIN}")
    changes = [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        # Debian marks its Python externally managed; the Dockerfile pip-installs uv into it.
        "ENV PIP_BREAK_SYSTEM_PACKAGES=1",
        f"ENV SSL_CERT_FILE={STANDIN_CA}",
        f"ENV PIP_CERT={STANDIN_CA}",
        "ENV UV_SYSTEM_CERTS=1",
        'CMD ["python3"]',
    ]
    eng("import", *(f"--change={change}" for change in changes), str(tarball), STANDIN)


def _debootstrap(tarball: Path) -> None:
    ensure_packages({"debootstrap": "debootstrap"})
    tarball.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    mirror = SNAPSHOT_MIRROR
    if not _reachable(f"{SNAPSHOT_MIRROR}/dists/{SUITE}/Release"):
        mirror = MIRROR
        log(
            f"Debian's archive of {SNAPSHOT} is out of reach: the stand-in is built from"
            f" today's {SUITE} ({MIRROR}), not pinned by date"
        )
    log(f"debootstrap {SUITE} (minbase, python3) from {mirror}, a stand-in for {REAL_BASE}")
    with tempfile.TemporaryDirectory(dir=tarball.parent, prefix="rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs"
        packages = "python3,python3-pip,python3-venv,ca-certificates"
        command = [_which("debootstrap") or "debootstrap", "--variant=minbase"]
        result = subprocess.run(
            [*command, f"--include={packages}", SUITE, str(rootfs), mirror],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise ImageError(f"debootstrap failed:\n{(result.stdout + result.stderr)[-3000:]}")
        shutil.copyfile(ca_bundle(), rootfs / STANDIN_CA.lstrip("/"))
        for package in (rootfs / "var/cache/apt/archives").glob("*.deb"):
            package.unlink()  # what debootstrap downloaded: not needed in the image
        partial = tarball.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], check=True)
        partial.replace(tarball)  # a cut-short run never leaves a truncated cache behind
    log(f"stand-in root file system cached in {time.monotonic() - started:.0f} s")


def _reachable(url: str) -> bool:
    try:
        # An http URL of our own constant, never a caller's.
        request = urllib.request.Request(url, method="HEAD")  # noqa: S310
        with urllib.request.urlopen(request, timeout=10):  # noqa: S310
            return True
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def _one_build_at_a_time() -> Iterator[None]:
    """Hold the build lock: a build started while another runs (CI starts one beside its lint,
    the container tests ask for the image) waits for it, then finds everything cached."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(tag: str = TAG, *, eng: Engine | None = None) -> Engine:
    """Build the Dockerfile at the project's root as `tag`; returns the engine that did."""
    with _one_build_at_a_time():
        return _build(tag, eng=eng)


def _build(tag: str, *, eng: Engine | None) -> Engine:
    eng = eng or engine()
    base = base_image(eng)
    started = time.monotonic()
    log(f"building {tag} with {eng.name} FROM {base}")
    options = ["--build-arg", f"PYTHON_IMAGE={base}", "--tag", tag]
    if eng.name == "podman":
        options += [*eng.run_options, "--layers"]
    eng("build", "--file", str(ROOT / "Dockerfile"), *options, str(ROOT))
    log(f"built {tag} in {time.monotonic() - started:.1f} s")
    return eng


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tag", default=TAG, help=f"the image's name (default {TAG})")
    args = parser.parse_args(argv)
    try:
        build(args.tag)
    except ImageError as exc:
        log(str(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
