"""Reading an attempt's StartMessage (durable/attempt_start.py) and which attempts the service notes
(durable/answered.py). The real path, Restate sending it after an outage, is in
tests/operator/test_oncall.py (the band read after the run finished)."""

from __future__ import annotations

from replenisher.durable.answered import note_for
from replenisher.durable.attempt_start import AttemptStart, attempt_start

# The first frame restate-server 1.7.12 sent for an attempt of `SkuAgent/<sku>/check` (captured
# from the request body): no failed attempt before it, so no field 7.
CHECK = bytes.fromhex(
    "00000000000000640a185d44792c66480d012062232d09db8933eb4e1d05be54c7cd1226696e765f31303542"
    "3962444c4452435a366769776b547977324672524765387152503033674118013212534b552d6578706c6f72"
    "652d393634313734400348c9f4c986c1d4e9d979"
)


def with_failed_attempts(frame: bytes, count: int) -> bytes:
    """`frame` with field 7 (retry_count_since_last_stored_entry, a varint) appended, as after `count` failures."""
    message = frame[8:] + bytes([7 << 3, count])
    return frame[:4] + len(message).to_bytes(4, "big") + message


def test_a_first_attempt_reads_as_one_that_follows_no_failure() -> None:
    start = attempt_start(CHECK)
    assert start == AttemptStart(
        invocation="inv_105B9bDLDRCZ6giwkTyw2FrRGe8qRP03gA", known_entries=1, failed_attempts=0, since_last_entry_ms=3
    )
    assert note_for("/invoke/SkuAgent/check", start) is None, "nothing to note"


def test_an_attempt_after_failures_is_noted_with_its_invocation() -> None:
    start = attempt_start(with_failed_attempts(CHECK, 6))
    assert start is not None and start.failed_attempts == 6
    note = note_for("/invoke/Replenish/run", start)
    assert note is not None and (note.invocation, note.handler, note.failed_attempts) == (
        "inv_105B9bDLDRCZ6giwkTyw2FrRGe8qRP03gA",
        "Replenish/run",
        6,
    )
    assert note_for("/invoke/ServiceAnswered/after_failures", start) is None, "a note is not noted"


def test_a_frame_not_all_there_or_not_a_start_reads_as_nothing() -> None:
    assert attempt_start(CHECK[:50]) is None
    assert attempt_start(CHECK[:6]) is None
    assert attempt_start(b"\x04\x00" + CHECK[2:]) is None, "another message type"
    assert attempt_start(CHECK[:8] + b"\xff" * (len(CHECK) - 8)) is None, "bytes that are no message"
