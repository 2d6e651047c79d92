"""What Restate tells the service when an attempt starts: the first frame of the attempt's request.

Restate opens every attempt with a `StartMessage` (service protocol, message type 0): the
invocation's id, how many journal entries it already has, and how many attempts failed since
the last entry was stored (`retry_count_since_last_stored_entry`, field 7) and how long ago that
entry was stored (`duration_since_last_stored_entry`, field 8, in ms). The SDK reads the message
but does not hand these on; the fields the protocol numbers are read here from the bytes Restate
sent (protobuf: varints and length-delimited fields), and nothing else in the message is.
"""

from __future__ import annotations

from pydantic import BaseModel

FRAME_HEADER = 8  # message type (u16), flags (u16), length (u32), big-endian
START_MESSAGE = 0x0000
_DEBUG_ID, _KNOWN_ENTRIES, _RETRY_COUNT, _SINCE_LAST_ENTRY = 2, 3, 7, 8
_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5


class AttemptStart(BaseModel):
    """An attempt as Restate started it."""

    invocation: str
    known_entries: int = 0
    failed_attempts: int = 0  # since the last journal entry was stored
    since_last_entry_ms: int = 0


def first_frame_length(head: bytes) -> int | None:
    """How many bytes the first frame takes (header included), once its header is in `head`."""
    if len(head) < FRAME_HEADER:
        return None
    return FRAME_HEADER + int.from_bytes(head[4:8], "big")


def attempt_start(body: bytes) -> AttemptStart | None:
    """The attempt's start, from the first bytes of its request; None unless they hold a whole StartMessage."""
    length = first_frame_length(body)
    if length is None or len(body) < length or int.from_bytes(body[0:2], "big") != START_MESSAGE:
        return None
    try:
        fields = _fields(body[FRAME_HEADER:length])
    except ValueError:
        return None
    invocation = fields.get(_DEBUG_ID)
    if not isinstance(invocation, bytes):
        return None
    return AttemptStart(
        invocation=invocation.decode(errors="replace"),
        known_entries=_number(fields.get(_KNOWN_ENTRIES)),
        failed_attempts=_number(fields.get(_RETRY_COUNT)),
        since_last_entry_ms=_number(fields.get(_SINCE_LAST_ENTRY)),
    )


def _number(value: int | bytes | None) -> int:
    return value if isinstance(value, int) else 0


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a varint runs past the message")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _fields(data: bytes) -> dict[int, int | bytes]:
    """The message's fields by number (the last of a repeated one), varints as ints, the rest as bytes."""
    fields: dict[int, int | bytes] = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            fields[number], at = _varint(data, at)
            continue
        if wire == _LENGTH_DELIMITED:
            size, at = _varint(data, at)
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
        else:
            raise ValueError(f"wire type {wire} is not used by the StartMessage")
        if at + size > len(data):
            raise ValueError("a field runs past the message")
        fields[number] = data[at : at + size]
        at += size
    return fields
