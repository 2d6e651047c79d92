"""Approval tokens survive being pasted into the CLI.

A token that began with "-" was read by argparse as a missing value for `--token`
(`replenisher approve SKU --token -x...` exits 2), which failed CI once in a while and
would stop a manager from approving by token.
"""

from __future__ import annotations

from replenisher.cli import parser
from replenisher.domain.documents import new_approval_token


def test_tokens_are_long_unique_and_never_read_as_an_option() -> None:
    tokens = [new_approval_token() for _ in range(2000)]
    assert len(set(tokens)) == len(tokens)
    assert all(len(t) >= 32 and t.isascii() and t.isalnum() for t in tokens)
    cli = parser()
    for token in tokens:
        args = cli.parse_args(["approve", "SKU-1", "--up-to", "4.00", "--token", token])
        assert args.token == token


def test_a_dash_token_is_what_argparse_refuses() -> None:
    """Positive control: the failure the token format avoids is real."""
    import pytest

    with pytest.raises(SystemExit):
        parser().parse_args(["approve", "SKU-1", "--up-to", "4.00", "--token", "-abc"])
