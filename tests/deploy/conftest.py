"""Fixtures for the container tests: the image, built as `make image` builds it, and its figures.

The image is built once per session with dev/image.py (Docker, else podman on the stand-in base,
installed when missing). Under CI=true a missing engine fails the tests; elsewhere it skips them.
Figures (image size, build time, each target's time to first answer, stop times) are printed in
a section of pytest's summary, so `make test` shows them without `-s`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pytest

from dev import image as image_tool
from tests.conftest import SummaryLines

IN_CI = os.environ.get("CI", "").lower() in {"1", "true"}


@dataclass(frozen=True)
class Image:
    tag: str
    engine: image_tool.Engine


@pytest.fixture(scope="session")
def figure(summary: SummaryLines) -> list[str]:
    """Append a line to the summary's `container image` section."""
    return summary("container image")


@pytest.fixture(scope="session")
def image(figure: list[str]) -> Image:
    """The service's image, built from the working tree (cached layers make a rebuild quick)."""
    started = time.monotonic()
    try:
        engine = image_tool.build(image_tool.TAG)
    except image_tool.ImageError as exc:
        if IN_CI:
            pytest.fail(f"the container image is required under CI: {exc}")
        pytest.skip(f"no container engine here: {exc}")
    size = engine("image", "inspect", "--format={{.Size}}", image_tool.TAG, capture=True)
    figure.append(
        f"{image_tool.TAG} ({engine.name}): {int(size.stdout.strip()) / 1e6:.0f} MB,"
        f" built in {time.monotonic() - started:.1f} s"
    )
    return Image(image_tool.TAG, engine)
