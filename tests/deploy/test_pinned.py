"""Every image the build starts FROM is named by digest: a tag alone moves under the same name.

The Dockerfile's bases resolve (through their `ARG` defaults) to `name@sha256:<64 hex>` or to an
earlier stage; `make image` builds on the same digest where it can pull it, else on the Debian
stand-in whose packages come from a dated snapshot of Debian's archive (dev/image.py).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from dev import image as image_tool

ROOT = Path(__file__).resolve().parents[2]
DIGEST = re.compile(r"^[^\s@]+@sha256:[0-9a-f]{64}$")


def unpinned_bases(dockerfile: str) -> list[str]:
    """The `FROM` references of a Dockerfile that name no digest (an earlier stage is fine)."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    found = []
    for raw in dockerfile.splitlines():
        line = raw.strip()
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        keyword = words[0].upper()
        if keyword == "ARG" and len(words) > 1:
            name, _, default = words[1].partition("=")
            args.setdefault(name, default)
        elif keyword == "FROM":
            rest = [w for w in words[1:] if not w.startswith("--")]
            reference = re.sub(
                r"\$\{?(\w+)\}?", lambda m: args.get(m[1], ""), rest[0] if rest else ""
            )
            if reference not in stages and not DIGEST.match(reference):
                found.append(reference or line)
            if len(rest) >= 3 and rest[1].upper() == "AS":
                stages.add(rest[2])
    return found


def dockerfiles() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*Dockerfile*", "*Containerfile*"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed] or [ROOT / "Dockerfile"]


@pytest.mark.parametrize("path", dockerfiles(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_base_is_named_by_digest(path: Path) -> None:
    assert unpinned_bases(path.read_text()) == []


def test_a_tag_alone_is_refused_and_a_digest_or_a_stage_accepted() -> None:
    digest = "sha256:" + "0" * 64
    assert unpinned_bases("FROM python:3.11-slim\n") == ["python:3.11-slim"]
    assert unpinned_bases("ARG BASE=python:3.11-slim\nFROM ${BASE} AS build\n") == [
        "python:3.11-slim"
    ]
    assert unpinned_bases("FROM python\n") == ["python"]
    # A digest that is not 64 hex digits is no digest.
    assert unpinned_bases("FROM python@sha256:abc\n") == ["python@sha256:abc"]
    pinned = f"ARG BASE=python:3.11-slim@{digest}\nFROM $BASE AS build\nFROM build\n"
    assert unpinned_bases(pinned) == []
    assert unpinned_bases(f"FROM --platform=linux/amd64 python@{digest} AS a\nFROM a\n") == []


def test_make_image_builds_on_the_dockerfiles_digest_or_a_dated_stand_in() -> None:
    """Where the real base can be pulled, `make image` passes the Dockerfile's own reference
    (no tag); the stand-in's packages come from Debian's archive as it was on one date."""
    assert DIGEST.match(image_tool.pinned_base())
    assert f"PYTHON_IMAGE={image_tool.pinned_base()}" in (ROOT / "Dockerfile").read_text()
    assert re.fullmatch(r"\d{8}T\d{6}Z", image_tool.SNAPSHOT)
    assert image_tool.SNAPSHOT_MIRROR.endswith(f"/archive/debian/{image_tool.SNAPSHOT}")
