"""The CLI's own usage errors: a wrong option is reported against the command it was given to."""

from __future__ import annotations

import pytest

from replenisher.cli import main


@pytest.mark.parametrize("argv", [["skus", "--bogus"], ["status", "SKU-1", "--bogus"], ["outcomes", "SKU-1", "extra"]])
def test_a_wrong_option_shows_the_commands_usage_not_the_top_level_one(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert f"usage: replenisher {argv[0]} " in err and f"replenisher {argv[0]}: error: unrecognized arguments" in err, (
        err
    )


def test_no_command_still_shows_the_top_level_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2 and "usage: replenisher [-h] COMMAND" in capsys.readouterr().err


def test_status_says_how_often_and_at_what_time_of_day_a_watched_sku_checks() -> None:
    from replenisher.cli import watch_line
    from replenisher.domain.sku import SkuView, Watch

    watched = SkuView(sku="SKU-1", watch=Watch(watching=True, interval_days=1), check_time="12:08")
    assert watch_line(watched) == "checked every 1 business day at about 12:08 (site time)"
    every3 = watched.model_copy(update={"watch": Watch(watching=True, interval_days=3), "check_time": None})
    assert watch_line(every3) == "checked every 3 business days", "no time known (the service is down)"
    assert watch_line(SkuView(sku="SKU-1")) == "not watched"
