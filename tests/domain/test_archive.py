"""The run archive: bounded whatever a run throws at it, tokens digested not kept, chunks kept once and in order."""

from __future__ import annotations

import json

from replenisher.domain.archive import (
    ARCHIVE_SCHEMA_VERSION,
    MAX_ARCHIVE_BYTES,
    MAX_RAW_CHARS,
    ArchiveWriter,
    Chunk,
    Entry,
    RunArchive,
    token_digest,
)
from replenisher.domain.decisions import Decision
from replenisher.domain.tools.limits import MAX_TURNS
from replenisher.domain.tools.quoting import DraftResult


def archive() -> RunArchive:
    return RunArchive(run_id="replenish-SKU-1-1", sku="SKU-1", request={"stock": {}})


def test_an_archive_of_the_largest_turns_stays_within_its_bound_and_says_where_it_was_cut() -> None:
    kept, writer = archive(), ArchiveWriter()
    hostile = json.dumps({"payload": {"text": "y" * 100_000}}).encode()
    for turn in range(MAX_TURNS):
        decision = Decision(
            tool="wait_for_supplier_reply", reason="r" * 50_000, model="m" * 500, args={"a": "b" * 9_000}
        )
        writer.add(Entry.now(float(turn)))
        writer.add(Entry.decided(turn, ["wait_for_supplier_reply"] * 12, decision))
        assert kept.add(writer.chunk()) == kept.model_dump_json(), "what add returns is the archive as kept"
        for seq in range(2):
            writer.add(Entry.receive(f"supplier-reply-{seq}", hostile))
        writer.add(Entry.step("read_supplier_reply 1", failure="f" * 10_000))
    assert kept.add(writer.chunk(outcome="cancelled")) == kept.model_dump_json()
    assert kept.size() <= MAX_ARCHIVE_BYTES
    assert kept.cut_at_chunk is not None and [c.seq for c in kept.chunks] == list(range(kept.cut_at_chunk))
    assert kept.outcome == "cancelled"  # the last chunk did not fit, its outcome is kept all the same
    first = kept.decisions[0]
    assert first.decision is not None and len(first.decision.reason) <= 400 and first.decision.args == {"_cut": True}
    received = next(e for e in kept.entries if e.op == "receive")
    assert len(received.value) == MAX_RAW_CHARS


def test_a_chunk_sent_twice_is_kept_once_and_chunks_are_kept_in_order() -> None:
    kept = archive()
    for seq in (1, 0, 1):
        chunk = ArchiveWriter().chunk().model_copy(update={"seq": seq, "entries": [Entry.now(float(seq))]})
        assert kept.add(chunk) == kept.model_dump_json()
    assert [c.seq for c in kept.chunks] == [0, 1] and kept.started_at == 0.0
    assert kept.schema_version == ARCHIVE_SCHEMA_VERSION


def test_approval_tokens_are_digested_alike_wherever_they_appear_and_never_kept() -> None:
    secret = "secret-token-123"
    message = {"payload": {"po_number": "PO-1", "token": secret, "approved": True}, "sender": {"party": "manager"}}
    drafted = DraftResult.model_construct(approval_token=secret)
    entries = [Entry.receive("approval-0", json.dumps(message).encode()), Entry.step("draft_purchase_order 1", drafted)]
    text = "".join(e.model_dump_json() for e in entries)
    assert secret not in text
    assert text.count(token_digest(secret)) == 2
    assert token_digest(secret) != token_digest("secret-token-124")


def test_a_message_that_is_not_json_is_kept_as_sent() -> None:
    assert Entry.receive("goods-0", b"not json {").value == "not json {"
    assert Entry.receive("goods-0", None).value is None


def test_a_header_that_comes_after_chunks_keeps_them_in_their_place() -> None:
    header = archive().model_copy(update={"code": "v7"})
    kept = RunArchive(run_id=header.run_id)
    kept.add(ArchiveWriter().chunk().model_copy(update={"seq": 1, "entries": [Entry.now(2.0)]}))
    kept = kept.with_header(header)
    kept.add(ArchiveWriter().chunk().model_copy(update={"seq": 0, "entries": [Entry.now(1.0)]}))
    assert (kept.sku, kept.code, kept.request) == ("SKU-1", "v7", {"stock": {}})
    assert [c.seq for c in kept.chunks] == [0, 1] and kept.started_at == 1.0


def test_an_archive_handed_over_whole_is_cut_to_its_bound_as_add_would_cut_it() -> None:
    fits = archive()
    fits.add(ArchiveWriter().chunk().model_copy(update={"entries": [Entry.now(1.0)]}))
    assert fits.within_bound() is fits
    # Chunks appended past `add`, as a sender that did not cut its own copy would hand them over.
    big = archive()
    for seq in range(6):
        big.chunks.append(Chunk(seq=seq, entries=[Entry.step(f"get_quotes {seq}", failure="f" * 9_000)] * 40))
    big.outcome = "received"
    assert big.size() > MAX_ARCHIVE_BYTES
    kept = big.within_bound()
    assert kept.size() <= MAX_ARCHIVE_BYTES and kept.outcome == "received" and kept.sku == big.sku
    assert kept.cut_at_chunk is not None and [c.seq for c in kept.chunks] == list(range(kept.cut_at_chunk))
