"""A failure pytest cannot render is still reported, plainly, rather than killing its worker."""

from __future__ import annotations

import pytest

from support import plain_report


def lookup() -> None:
    {}["missing"]


@pytest.mark.parametrize(
    "error",
    [SystemError("AST constructor recursion depth mismatch"), pytest.fail.Exception("Timeout (>180.0s)")],
    ids=["ast-bug", "timeout-while-rendering"],
)
def test_a_failure_pytest_cannot_render_is_reported_frame_by_frame(
    request: pytest.FixtureRequest, error: BaseException
) -> None:
    call = pytest.CallInfo.from_call(lookup, "call")
    report = plain_report(request.node, call, error)
    assert report.failed and report.when == "call" and report.nodeid == request.node.nodeid
    text = str(report.longrepr)
    assert "in lookup" in text and '{}["missing"]' in text, text
    assert "KeyError: 'missing'" in text and "could not render this failure" in text, text
