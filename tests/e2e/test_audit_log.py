"""The audit log through the real stack: every entry kept past a page, in order, chained; a retried
send adds once; bad input gets a 400 and changes nothing. Read back through ingress, as
`replenisher audit` and the console read it."""

from __future__ import annotations

import asyncio
import csv
import io
import os
import subprocess
import sys
import uuid

import httpx
import pytest

from replenisher.domain.audit import PAGE_SIZE, AuditRecord, day_of
from replenisher.operations.audit import append_audit, read_day
from replenisher.stack.runtime import RestateRuntime
from support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def record(at: float, n: int, who: str) -> AuditRecord:
    return AuditRecord(
        at=at, event="sign_in_failed", who=who, via="console", source="10.0.0.9", what=f"attempt {n}",
        outcome="refused", reason="wrong person or password",
    )  # fmt: skip


async def test_a_flood_of_entries_is_kept_whole_in_order_and_a_resend_adds_nothing(
    restate_runtime: RestateRuntime, service: object
) -> None:
    # A day of its own (far back, so no other test shares it), filled past one page.
    at = 946_684_800.0 + uuid.uuid4().int % 10_000 * 86_400  # some day in 2000-2027
    day, who, count = day_of(at), f"flood-{uuid.uuid4().hex[:6]}", PAGE_SIZE + 3
    ingress = restate_runtime.ingress_url
    async with httpx.AsyncClient() as client:
        records = [record(at + n, n, who) for n in range(count)]
        for start in range(0, count, 50):  # a few at a time, as a busy console would
            await asyncio.gather(*(append_audit(ingress, r, client=client) for r in records[start : start + 50]))
        await append_audit(ingress, records[7], client=client)  # a retried send: same entry, same key

        async def all_in() -> object:
            read = await read_day(ingress, day, client=client)
            return read if read.total >= count else None

        read = await eventually(all_in, timeout=120, what=f"{count} audit entries to be appended")
        assert read.total == count and len(read.entries) == count, "every entry once, the resend not again"
        assert read.breaks == []
        assert [e.seq for e in read.entries] == list(range(count))
        assert sorted(e.what for e in read.entries) == sorted(f"attempt {n}" for n in range(count))

        bad_day = await client.post(
            f"{ingress}/AuditLog/{day_of(at + 86_400)}/append", content=records[0].model_dump_json(),
            headers={"content-type": "application/json"},
        )  # fmt: skip
        assert bad_day.status_code == 400 and "belongs to the log of" in bad_day.text
        not_a_record = await client.post(f"{ingress}/AuditLog/{day}/append", json={"event": "approval", "who": "x"})
        assert not_a_record.status_code == 400 and "bad request" in not_a_record.text
        bad_page = await client.post(f"{ingress}/AuditLog/{day}/page", json=-1)
        assert bad_page.status_code == 400
        again = await read_day(ingress, day, client=client)
        assert again.total == count and again.entries == read.entries, "the refused calls changed nothing"

    # `replenisher audit` as the docs run it (docs/operating/people.md, "The audit log").
    env = {**os.environ, "REPLENISHER_INGRESS_URL": ingress}
    command = [sys.executable, "-m", "replenisher.cli", "audit", "--since", day, "--format", "csv"]
    done = await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert len(rows) == count and {r["who"] for r in rows} == {who} and rows[-1]["seq"] == str(count - 1)
    backwards = [*command[:4], "--since", day, "--until", "1999-01-01"]
    refused = await asyncio.to_thread(subprocess.run, backwards, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "is after --until" in refused.stderr
