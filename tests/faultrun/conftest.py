"""The fault run's figures in a section of pytest's summary, so `make test` shows them."""

from __future__ import annotations

import pytest

FIGURES = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[FIGURES] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    figures = terminalreporter.config.stash.get(FIGURES, [])
    if figures:
        terminalreporter.section("fault run")
        for line in figures:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def figure(pytestconfig: pytest.Config) -> list[str]:
    """Lines for the summary's `fault run` section."""
    return pytestconfig.stash[FIGURES]
