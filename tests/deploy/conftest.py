"""Zips built once per session by deploy/lambda/build.py, for the package and end-to-end tests;
and the cluster test's tally at the end of the run."""

from __future__ import annotations

import os
from typing import Any

import pytest

from .stacks import LOCAL_ARCH, LOCAL_PYTHON, SUMMARY_LINES, build_lambda_zip

ARCHES_ENV = "REPLENISHER_LAMBDA_ARCHES"


def lambda_arches() -> list[str]:
    """Architectures whose deployable zip the tests build: this machine's unless told
    (`make lambda-test` asks for both)."""
    return [a.strip() for a in os.environ.get(ARCHES_ENV, LOCAL_ARCH).split(",") if a.strip()]


@pytest.fixture(scope="session")
def local_lambda_zip(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The zip for this machine's architecture and Python, so the tests can run it here."""
    return build_lambda_zip(tmp_path_factory.mktemp("lambda-local"), LOCAL_ARCH, LOCAL_PYTHON)


@pytest.fixture(scope="session", params=lambda_arches())
def runtime_lambda_zip(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The zip as deployed: the template's runtime, per architecture."""
    return build_lambda_zip(tmp_path_factory.mktemp(f"lambda-{request.param}"), request.param)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if os.environ.get("REPLENISHER_CLUSTER_SUMMARY"):
        return  # `make cluster-test` prints it last, after pytest's own summary
    for line in SUMMARY_LINES:
        terminalreporter.write_line(line)
