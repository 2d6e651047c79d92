"""Business limits the rules enforce. In code, not in the prompt."""

from replenisher.domain.promises import MAX_LEAD_DAYS

MAX_TURNS = 30
MAX_QUOTE_ROUNDS = 3
MAX_APPROVAL_ROUNDS = 3
MAX_CHASES = 2
MAX_STATUS_CHECKS = 5
MAX_GOODS_OVERDUE = 2

# --- Bounds on what suppliers state (structured fields are untrusted data) -------------------

MAX_QUOTE_UNIT_PRICE = 100_000.0
"""Far above any unit price this catalogue buys: a quote beyond it is a misplaced decimal or a
hostile quote, not something to put in front of the manager."""

MAX_QUOTE_VALID_DAYS = 365.0
"""Business days. No supplier holds a price for more than about a year; a quote valid longer (or
for ever) would keep a stale price approvable and orderable long after the market moved."""

MAX_QUOTE_LEAD_DAYS = MAX_LEAD_DAYS
"""Business days. A lead time beyond a year is no delivery at all, and it would park the run's
goods wait for as long; the same bound the SKU's memory puts on announced lead times."""

DELIVERY_BOUND_LEAD_FACTOR = 3.0
"""A delivery date an email states is believed up to this multiple of the quoted lead time: later
than that, the supplier is not keeping the terms we ordered on, so the run follows up (chases,
then waits no longer than the bound) instead of waiting as long as the email says."""

DELIVERY_BOUND_FLOOR_DAYS = 10.0
"""Business days. The least the bound allows, so an honest plan of several shipments on a short
lead time (the last one comes some days after the first) is not taken for a stall."""

DELIVERY_BOUND_UNQUOTED_DAYS = 60.0
"""Business days. The bound when the run holds no quote for its order (an order it adopted from an
earlier run): about a quarter, after which a human should hear about it anyway."""
