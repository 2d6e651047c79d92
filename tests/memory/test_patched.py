"""`engine.patched` on the in-memory engine and in a run's archive (docs/deploying/upgrading.md,
"Versioned branches"): the branch a run's code knows is taken, the one it does not know is not, the
archive notes the new branch where it was taken and a replay of it takes the same, and a patch that
is not named is refused. The same branch through a real stack: tests/operator/test_patched.py.
"""

from __future__ import annotations

import pytest

from replenisher.domain.policy import OfflinePolicy
from replenisher.in_memory.engine import Run, run_in_memory
from replenisher.in_memory.world import Clock, Inbox, MemoryWorld, SupplierSpec
from replenisher.loop import patches, run
from replenisher.replay.core import replay
from upgrade.patched import MARK, PATCH, WHAT, marked

WAITS = {"wait_for_approval", "wait_for_supplier_reply", "wait_for_goods"}


@pytest.fixture
def branch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(patches.PATCHES, PATCH, WHAT)
    monkeypatch.setattr(run, "wait", marked(run.wait))


async def a_run(known: tuple[str, ...] | None) -> Run:
    world = MemoryWorld(Clock(), {"acme": SupplierSpec(price=4.0)})
    done = await run_in_memory(OfflinePolicy(), world, Inbox(world), suppliers=["acme"], patches=known)
    assert done.result.outcome == "received"
    return done


def marks(done: Run) -> list[bool]:
    return [r.summary.endswith(MARK) for r in done.state.history if r.tool in WAITS]


@pytest.mark.usefixtures("branch")
async def test_a_run_on_code_that_knows_the_patch_takes_the_new_branch_and_its_replay_too() -> None:
    done = await a_run(None)
    assert len(marks(done)) >= 2 and all(marks(done))
    assert done.engine.archive is not None
    noted = [e for e in done.engine.archive.entries if e.op == "patched"]
    assert [e.name for e in noted] == [PATCH] * len(marks(done))
    # The replay takes the branch at each point the run did: else it would stop at the first note.
    report = await replay(done.engine.archive, OfflinePolicy())
    assert report.stopped == "end of record" and report.agree == report.turns, report


@pytest.mark.usefixtures("branch")
async def test_a_run_on_code_without_the_patch_takes_the_old_branch_and_notes_nothing() -> None:
    done = await a_run(())
    assert len(marks(done)) >= 2 and not any(marks(done))
    assert done.engine.archive is not None
    assert not [e for e in done.engine.archive.entries if e.op == "patched"]
    report = await replay(done.engine.archive, OfflinePolicy())
    assert report.stopped == "end of record", report


async def test_a_patch_that_is_not_named_is_refused() -> None:
    engine = (await a_run(())).engine
    with pytest.raises(patches.UnknownPatch, match="no-such-patch"):
        engine.patched("no-such-patch")
    with pytest.raises(patches.UnknownPatch, match="no-such-patch"):
        patches.here("v1").knows("no-such-patch")
