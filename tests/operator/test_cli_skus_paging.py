"""`replenisher skus` a page at a time, against the real stack: the rows on stdout, where the page
sits and how to get the next on stderr, and bad paging refused before anything is read."""

from __future__ import annotations

import json
import re
from uuid import uuid4

import httpx
import pytest
from operator_support import Cli

from e2e.scenario import ok
from replenisher.domain.sku_list import SKU_LIST, ShardQuery, shard_key_of
from replenisher.operations.restate.http import RestateHttp
from replenisher.operations.restate.sku_list import list_page
from replenisher.stack.runtime import RestateRuntime
from support import RegisteredService, eventually

pytestmark = pytest.mark.e2e


async def full_shelved_agents(
    prefix: str, skus: list[str], ingress: httpx.AsyncClient, world_client: httpx.AsyncClient
) -> None:
    """An agent for each SKU, its shelf full: a check makes the agent and starts no run."""
    supplier = {"name": f"Supplier {prefix}", "prices": {}, "lead_days": 1, "reply_days": 1}
    ok(await world_client.put(f"/admin/suppliers/sup-{prefix}", json=supplier))
    for sku in skus:
        item = {"on_hand": 90, "safety_stock": 20, "target_stock": 100, "suppliers": [f"sup-{prefix}"]}
        ok(await world_client.put(f"/admin/items/{sku}", json=item))
        assert ok(await ingress.post(f"/SkuAgent/{sku}/check"))["started"] is None


async def test_skus_pages_with_limit_and_offset_and_says_where_the_page_sits(
    cli: Cli, service: RegisteredService, ingress: httpx.AsyncClient, world_client: httpx.AsyncClient
) -> None:
    # Five agents of one family, their shelves full.
    prefix = f"PGC-{uuid4().hex[:6]}"
    skus = [f"{prefix}-{i}" for i in range(5)]
    await full_shelved_agents(prefix, skus, ingress, world_client)

    every = await cli("skus", "--search", prefix, "--json")
    assert every.code == 0 and every.err == "", every
    assert [row["sku"] for row in json.loads(every.out)] == skus, "all five, by SKU, and nothing on stderr"
    formatted = await cli("skus", "--search", prefix, "--format", "json")
    assert formatted.code == 0 and json.loads(formatted.out) == json.loads(every.out), formatted

    first = await cli("skus", "--search", prefix, "--limit", "2")
    assert first.code == 0, first
    assert [line.split()[0] for line in first.out.splitlines()[2:]] == skus[:2], first
    assert first.err == "rows 1-2 of 5; --offset 2 for the next (--limit 0 for all)\n", first

    last = await cli("skus", "--search", prefix, "--limit", "2", "--offset", "4", "--json")
    assert [row["sku"] for row in json.loads(last.out)] == skus[4:], last
    assert last.err == "rows 5-5 of 5 (--limit 0 for all)\n", last

    backwards = await cli("skus", "--search", prefix, "--desc", "--limit", "0", "--json")
    assert [row["sku"] for row in json.loads(backwards.out)] == skus[::-1] and backwards.err == "", backwards

    past = await cli("skus", "--search", prefix, "--offset", "9")
    assert past.code == 0 and past.out == "no rows past --offset 9: 5 match\n", past
    none = await cli("skus", "--search", f"{prefix}-nothing")
    assert none.code == 0 and none.out == "no SKU agent matches\n", none


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--limit", "-1"], "argument --limit: -1 is below 0"),
        (["--offset", "x"], "argument --offset: 'x' is not a whole number"),
        (["--search", "<script>"], "--search '<script>': letters, digits"),
        (["--sort", "price"], "argument --sort: invalid choice: 'price'"),
        (["--format", "xml"], "argument --format: invalid choice: 'xml'"),
    ],
)
async def test_bad_paging_is_one_clear_line_and_a_non_zero_exit(cli: Cli, args: list[str], reason: str) -> None:
    result = await cli("skus", *args)
    assert result.code != 0 and reason in result.err and result.out == "", result


@pytest.mark.slow
async def test_a_page_by_sku_read_on_its_own_is_the_same_rows_as_the_page_cut_from_every_row(
    cli: Cli, service: RegisteredService, ingress: httpx.AsyncClient, world_client: httpx.AsyncClient
) -> None:
    # By SKU with a search, `replenisher skus` reads only its page's agents from Restate (with --limit 0,
    # every agent, then cuts): both must give the same rows. `_` in a search is a character, not a wildcard.
    prefix = f"PGR-{uuid4().hex[:6]}"
    skus = sorted([f"{prefix}-a_1", f"{prefix}-aX1", f"{prefix}-b", f"{prefix}-c"])  # X before _
    await full_shelved_agents(prefix, skus, ingress, world_client)

    every = await cli("skus", "--search", prefix, "--limit", "0", "--json")
    assert every.code == 0, every
    rows = json.loads(every.out)
    assert [row["sku"] for row in rows] == skus
    one_by_one = []
    for offset in range(len(skus)):
        page = await cli("skus", "--search", prefix, "--limit", "1", "--offset", str(offset), "--json")
        assert page.code == 0, page
        one_by_one += json.loads(page.out)
    assert one_by_one == rows, "page by page, the very rows of the whole list"

    backwards = await cli("skus", "--search", prefix, "--desc", "--limit", "3", "--json")
    assert json.loads(backwards.out) == rows[::-1][:3], backwards
    assert backwards.err == "rows 1-3 of 4; --offset 3 for the next (--limit 0 for all)\n", backwards

    underscore = await cli("skus", "--search", f"{prefix}-a_1", "--json")
    assert [row["sku"] for row in json.loads(underscore.out)] == [f"{prefix}-a_1"], underscore
    upper = await cli("skus", "--search", f"{prefix.lower()}-AX1", "--json")
    assert [row["sku"] for row in json.loads(upper.out)] == [f"{prefix}-aX1"], "the search ignores case"


async def test_skus_fills_a_list_that_lacks_agents_once_and_refill_mends_it_on_demand(
    cli: Cli,
    service: RegisteredService,
    ingress: httpx.AsyncClient,
    world_client: httpx.AsyncClient,
    restate_runtime: RestateRuntime,
) -> None:
    # Agents the list does not know of, as after an upgrade from code that had no list: their shard's
    # state is wiped under them (Restate's admin API; it applies it a moment later).
    prefix = f"PGF-{uuid4().hex[:6]}"
    skus = [f"{prefix}-{i}" for i in range(3)]
    await full_shelved_agents(prefix, skus, ingress, world_client)
    http = RestateHttp(str(ingress.base_url), restate_runtime.admin_url, client=ingress)
    shards = sorted({shard_key_of(sku) for sku in skus})
    async with httpx.AsyncClient(base_url=restate_runtime.admin_url, timeout=30) as admin:
        for key in shards:
            wiped = await admin.post(f"/services/{SKU_LIST}/state", json={"object_key": key, "new_state": {}})
            assert wiped.status_code in (200, 202), wiped.text

    async def forgotten() -> bool:
        page = await list_page(http, ShardQuery(now=0.0, upto=0, q=prefix), 0, 10)
        return not page.filled and page.matching == 0

    await eventually(forgotten, timeout=30, what="the list without the agents")

    filled = await cli("skus", "--search", prefix, "--json")
    assert filled.code == 0, filled
    assert [row["sku"] for row in json.loads(filled.out)] == skus, "every agent, though the list lacked them"
    note = re.fullmatch(r"filled the SKU list from (\d+) agents' records: (\d+) entries added or mended\n", filled.err)
    assert note is not None and int(note[2]) >= len(skus), filled
    row = json.loads(filled.out)[0]
    assert (row["watching"], row["runs"], row["on_hand"], row["safety_stock"]) == (False, 0, 90, 20), row
    assert (await list_page(http, ShardQuery(now=0.0, upto=0, q=prefix), 0, 10)).filled

    again = await cli("skus", "--search", prefix, "--json")
    assert again.code == 0 and again.err == "" and json.loads(again.out) == json.loads(filled.out), again

    refill = await cli("skus", "--search", prefix, "--refill")
    assert refill.code == 0 and refill.err.startswith("filled the SKU list from "), refill
    assert [line.split()[0] for line in refill.out.splitlines()[2:]] == skus, refill
