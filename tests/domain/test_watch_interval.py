"""A watch's interval has a floor: a vanishing one made the SKU tick in a hot loop."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from replenisher.durable.sku_agent import MIN_CHECK_INTERVAL_DAYS, WatchRequest


@pytest.mark.parametrize("interval", [0, -1, 1e-300, MIN_CHECK_INTERVAL_DAYS / 2, 366])
def test_an_interval_outside_its_bounds_is_refused(interval: float) -> None:
    with pytest.raises(ValidationError):
        WatchRequest(interval_days=interval)


def test_the_floor_and_a_day_are_accepted() -> None:
    assert WatchRequest(interval_days=MIN_CHECK_INTERVAL_DAYS).interval_days == MIN_CHECK_INTERVAL_DAYS
    assert WatchRequest(interval_days=1).interval_days == 1
