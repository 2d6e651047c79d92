"""Changes of the service's settings, in the audit log.

The service's settings live in its deployment's environment, which the product never sees change.
What it does see: each deployment's services name, at discovery, the settings an auditor asks about
(`config.AUDITED`: how runs buy, who may approve, which files say so; never a secret), and Restate
keeps that with the deployment. A deployment whose settings differ from those of the deployment
registered before it is a settings change, recorded as `settings_changed` at the moment it was
registered, with what changed in words (`REPLENISHER_BACKUP_APPROVER: backup-approver -> ines`).

Whoever reads first records it: `replenisher audit`, the console's Audit page, `replenisher
deployments` (and `prune`, before it removes one). Each change is written once: the day's log is
read first, and the send's idempotency key is the entry itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import httpx

from replenisher.domain.audit import AuditRecord, day_of
from replenisher.operations.audit import append_audit, read_day
from replenisher.operations.restate.deployments import Registered


def settings_changes(deployments: Sequence[Registered]) -> list[AuditRecord]:
    """Each deployment whose audited settings differ from those of the one registered before it
    (of those that named their settings: code from before this names none, and is passed over)."""
    said = sorted(
        (d for d in deployments if d.settings is not None and d.created_at is not None),
        key=lambda d: (d.created_at or 0.0, d.id),
    )
    records: list[AuditRecord] = []
    for before, after in itertools.pairwise(said):
        assert before.settings is not None and after.settings is not None and after.created_at is not None
        changed = [
            f"{name}: {before.settings.get(name, '(unset)')} -> {after.settings.get(name, '(unset)')}"
            for name in sorted(before.settings.keys() | after.settings.keys())
            if before.settings.get(name) != after.settings.get(name)
        ]
        if changed:
            code = f"code {after.code_version}: " if after.code_version else ""
            records.append(
                AuditRecord(
                    at=after.created_at,
                    event="settings_changed",
                    who=f"deployment {after.id}"[:200],
                    via="restate",
                    source=after.endpoint[:100],
                    what=(code + "; ".join(changed))[:1000],
                    outcome="done",
                )
            )
    return records


async def record_settings_changes(
    deployments: Sequence[Registered], ingress_url: str, *, client: httpx.AsyncClient
) -> list[AuditRecord]:
    """Write each settings change not yet in its day's log; the ones written."""
    written = []
    logged: dict[str, set[tuple[str, str, str]]] = {}
    for record in settings_changes(deployments):
        day = day_of(record.at)
        if day not in logged:
            entries = (await read_day(ingress_url, day, client=client)).entries
            logged[day] = {(e.event, e.who, e.what) for e in entries}
        if (record.event, record.who, record.what) in logged[day]:
            continue
        await append_audit(ingress_url, record, client=client)
        written.append(record)
    return written
