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
