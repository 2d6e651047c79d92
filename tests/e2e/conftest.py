from __future__ import annotations

import pytest

from e2e import crash_table


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if crash_table.ROWS:
        terminalreporter.section("crash matrix")
        for line in crash_table.lines():
            terminalreporter.write_line(line)
