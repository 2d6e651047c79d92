"""The `SkuList` object on a real restate-server and granian: a put reaches the next page (its shard's
copy of the bucket is read again), an older revision or a wrong shard changes nothing, bad input is
a 400 with the reason, and neither reads nor puts leave calls on record to slow Restate's scans."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from bench.list_shards import Probe, served

from replenisher.domain.sku_list import SHARDS, SKU_LIST, ListEntry, ListPage, ShardQuery, shard_key, shard_of
from replenisher.operations.restate.errors import Refused
from replenisher.operations.restate.sku_list import list_page, put_entries

NOW = 1_800_000_000.0


async def page_of(probe: Probe, **params: Any) -> ListPage:
    return await list_page(probe.http, ShardQuery(now=NOW, upto=0, budget=10.0, **params), 0, 50)


@pytest.fixture
async def probe(tmp_path: Path) -> AsyncIterator[Probe]:
    async with served(tmp_path) as probe:
        yield probe


def other_shard(sku: str) -> str:
    return shard_key((shard_of(sku) + 1) % SHARDS)


async def test_a_put_shows_on_the_next_page_and_an_older_one_changes_nothing(probe: Probe) -> None:
    assert (await page_of(probe)).total == 0, "an empty list has no rows, and no shard refuses"
    first = ListEntry(sku="BOLT-M8", revision=2, watched=True, runs=1, on_hand=3, safety_stock=10)
    others = [ListEntry(sku=f"NUT-{i:03d}", revision=1) for i in range(40)]
    assert await put_entries(probe.http, [first, *others]) == 41

    page = await page_of(probe, q="bolt")
    assert [(e.sku, e.runs, e.revision) for e in page.entries] == [("BOLT-M8", 1, 2)]
    assert (page.matching, page.total, page.counts["below-safety"]) == (1, 41, 1)

    older = first.model_copy(update={"revision": 1, "runs": 9})
    assert await put_entries(probe.http, [older]) == 0
    assert [e.runs for e in (await page_of(probe, q="bolt")).entries] == [1]

    # The same bucket written again: the shard's copy held by the service must be read afresh.
    newer = first.model_copy(
        update={
            "revision": 3,
            "runs": 2,
            "active_run": "replenish-BOLT-M8-2",
            "waiting_tool": "wait_for_approval",
            "waiting_since": NOW - 60,
            "asked_price": 12.5,
            "wait_run": 2,
        }
    )
    assert await put_entries(probe.http, [newer]) == 1
    page = await page_of(probe, waiting="manager")
    assert [(e.sku, e.runs, e.active_run) for e in page.entries] == [("BOLT-M8", 2, "replenish-BOLT-M8-2")]
    assert (page.counts["manager"], page.counts["over-budget"], page.counts["below-safety"]) == (1, 1, 1)


async def test_bad_input_is_refused_with_its_reason_and_changes_nothing(probe: Probe) -> None:
    entry = ListEntry(sku="BOLT-M8", revision=1)
    assert await put_entries(probe.http, [entry]) == 1
    client, ingress = probe.http.client, probe.http.ingress_url

    wrong = await client.post(
        f"{ingress}/{SKU_LIST}/{other_shard('BOLT-M8')}/put_many",
        json={"entries": [{"sku": "BOLT-M8", "revision": 5, "runs": 7}]},
    )
    assert wrong.status_code == 400 and "belongs to shard" in wrong.text, wrong.text

    extra = await client.post(
        f"{ingress}/{SKU_LIST}/{shard_key(shard_of('BOLT-M8'))}/put_many",
        json={"entries": [{"sku": "BOLT-M8", "revision": 6, "x": 1}]},
    )
    assert extra.status_code == 400 and "x" in extra.text, extra.text

    with pytest.raises(Refused) as refused:
        await list_page(probe.http, ShardQuery.model_construct(now=NOW, upto=10, sort="price"), 0, 10)  # type: ignore[arg-type]
    assert refused.value.status == 400

    private = await client.post(f"{ingress}/{SKU_LIST}/{shard_key(shard_of('BOLT-M8'))}/put", json=entry.model_dump())
    assert private.status_code >= 400, "an agent's put is not the ingress's to make"
    nowhere = await client.post(f"{ingress}/{SKU_LIST}/99/mark_filled")
    assert nowhere.status_code == 400 and "no shard '99'" in nowhere.text, nowhere.text

    page = await page_of(probe)
    assert [(e.sku, e.revision, e.runs) for e in page.entries] == [("BOLT-M8", 1, 0)]


async def test_the_list_says_it_is_filled_only_once_every_shard_was_marked(probe: Probe) -> None:
    assert await put_entries(probe.http, [ListEntry(sku=f"SKU-{i}", revision=1) for i in range(30)]) == 30
    assert not (await page_of(probe)).filled, "entries the agents put are not yet every agent's"
    client, ingress = probe.http.client, probe.http.ingress_url
    for shard in range(SHARDS - 1):
        assert (await client.post(f"{ingress}/{SKU_LIST}/{shard_key(shard)}/mark_filled")).status_code == 200
    assert not (await page_of(probe)).filled, "one shard is not marked yet"
    assert (await client.post(f"{ingress}/{SKU_LIST}/{shard_key(SHARDS - 1)}/mark_filled")).status_code == 200
    page = await page_of(probe)
    assert page.filled and page.total == 30


async def test_reads_and_puts_leave_no_call_on_record(probe: Probe) -> None:
    """Restate keeps a finished call's journal for its retention, and every SQL scan over `sys_invocation`
    pays for each one kept: a page read every few seconds must not add to them."""
    assert await put_entries(probe.http, [ListEntry(sku=f"SKU-{i}", revision=1) for i in range(30)]) == 30
    for _ in range(3):
        assert (await page_of(probe)).total == 30
    target = f"'{SKU_LIST}'"
    deadline = time.monotonic() + 30
    while True:
        rows = await probe.http.sql(f"SELECT status FROM sys_invocation WHERE target_service_name = {target}")
        if not rows or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert rows == [], rows
