"""The fault run's figures in a section of pytest's summary, so `make test` shows them."""

from __future__ import annotations

import pytest

from tests.conftest import SummaryLines


@pytest.fixture(scope="session")
def figure(summary: SummaryLines) -> list[str]:
    """Lines for the summary's `fault run` section."""
    return summary("fault run")
