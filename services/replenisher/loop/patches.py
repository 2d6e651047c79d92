"""Versioned branches: which code first ran each part of a run, and `patched(name)`.

A run lasts weeks and may be moved (paused, then resumed on another deployment: docs/deploying/
upgrading.md) onto code newer than the code that started it. Replaying its journal there must take
the same path the journal was written on, so a change of behaviour that must reach runs already in
flight cannot simply replace the old code: it branches, and the branch is taken on what the journal
says, never on what this process is.

What the journal says is a `Stamp`: the code version (`REPLENISHER_CODE_VERSION`) and the patches
(names in `PATCHES`) of the code that gave an answer. A run's engine carries this code's stamp in
every answer it journals (a decision, a step's result) and the run's request carries the stamp of
the code that started it; a replay reads them back as they were written. So at any point of a run
its engine knows the stamp of the code that first ran it there: the one of the last answer it was
given, or of its request before the first. That is what a turn is labelled with
(`TurnRecord.code`, taken right after the turn's decision) and what `patched` reads.

`engine.patched(name)` is True when the code that gave the run's last answer (or started it) knew
the patch `name`. No journal entry of its own, so no journal that passed the branch point without
one diverges:

- a run started on code that knows the patch takes the new branch everywhere;
- a run moved from older code replays the turns it ran there on the old branch (its journaled
  answers carry no patch), goes on in the turn it was in on the old branch too, and takes the new
  one from its first answer given on the new code (its next decision, or a step before it);
- a replay of either returns what the first run did, whatever code replays it.

The old branch must do exactly what the old code did, journal entries and state written included;
the new branch may do anything the old journal never reached. A patch is named in `PATCHES` (with
what it changes) before any code asks for it; asking for one that is not is a bug, refused.
A patch is dropped (its old branch deleted) only once no run stamped without it can still be
replayed: every deployment that ran code without it drained and removed (`replenisher deployments`).
"""

from __future__ import annotations

from pydantic import BaseModel

LIST_WAITS = "list-waits"
LIST_WAIT_ENDS = "list-wait-ends"

PATCHES: dict[str, str] = {
    LIST_WAITS: "a run puts each wait it enters and leaves on its SKU's entry of the SKU list "
    "(`SkuList/put_wait`, a one-way send after the wait's state is set; since 0.14)",
    LIST_WAIT_ENDS: "a wait's end is put on the list only before a delay or after a decision or step that "
    "failed its retries: the run's next wait replaces it, and its end hides it (the agent's put says no run "
    "is active); three sends fewer per replenishment (since 0.15)",
}
"""Every patch this code knows, by name: what its new branch changes (and since which version)."""


class UnknownPatch(KeyError):
    """`patched` asked for a name that is not in `PATCHES`: a bug in the code that asks."""


class Stamp(BaseModel):
    """The code that first gave a journaled answer: its version and the patches it knew."""

    code: str
    patches: tuple[str, ...] = ()

    def knows(self, name: str) -> bool:
        return check(name) in self.patches


def check(name: str) -> str:
    """`name`, if it is a patch this code knows; else `UnknownPatch`."""
    if name not in PATCHES:
        raise UnknownPatch(f"no patch {name!r}: name it in replenisher.loop.patches.PATCHES first")
    return name


def known() -> tuple[str, ...]:
    """The patches this code knows, in a fixed order (as they are journaled)."""
    return tuple(sorted(PATCHES))


def here(code: str) -> Stamp:
    """This code's own stamp, under the version `code` it runs as."""
    return Stamp(code=code, patches=known())
