"""How long Restate keeps what a finished call leaves behind, set on purpose (Restate's defaults are one day).

Each service states these at discovery, so they hold wherever it is registered, whatever the
server's own defaults; `restate.toml` sets the same as the server's defaults, for anything
registered without them. What each one serves:

- **Journal** (`JOURNAL`, 14 days): a finished call's journal, which the timeline reads for the
  exact time of every step, retry and wait (`replenisher timeline`, the console's run page). An
  incident is looked into within two weeks; after that the timeline is built from the run's
  history and its archive, without the times.
- **Workflow** (`WORKFLOW`, 35 days): a finished run's state and result: who decided and why
  (`replenisher outcomes`' decision column), its turns, its waits. It covers a monthly review of
  the month's purchases with a few days to spare. A run's archive (`RunArchive`, `replenisher
  replay`), the SKU's record of outcomes and the audit log (`AuditLog`) are object state, which
  Restate never drops: they hold past this window.
- **Idempotency** (`IDEMPOTENCY`, 14 days): how long a repeated command with the same
  idempotency key (the CLI's and the door's) is answered from the first one instead of being run
  again. A call with a key keeps its journal no longer than this, so it is not shorter than the
  journal's. Restate 1.7.12 also keeps every finished call of the handler this long, with a key or
  without (its `completion_retention` in `sys_invocation`): a SKU's daily check stays listed for 14
  days, and every scan of `sys_invocation` pays for each one kept (about 0.5 µs,
  `make bench-state-scan`). `SkuList` keeps none (`durable/sku_list.py`).

The larger the windows, the more Restate stores: one small journal per finished call (a SKU's
daily check, a message) for `JOURNAL`, one run's state for `WORKFLOW`.
"""

from __future__ import annotations

from datetime import timedelta

JOURNAL = timedelta(days=14)
WORKFLOW = timedelta(days=35)
IDEMPOTENCY = timedelta(days=14)

# The options of every service (`restate.VirtualObject(name, **OBJECT)`); a workflow takes the
# same, and `WORKFLOW` on its `main` handler.
OBJECT = {"journal_retention": JOURNAL, "idempotency_retention": IDEMPOTENCY}
