"""Business limits the rules enforce. In code, not in the prompt."""

MAX_TURNS = 30
MAX_QUOTE_ROUNDS = 3
MAX_APPROVAL_ROUNDS = 3
MAX_CHASES = 2
MAX_STATUS_CHECKS = 5
MAX_GOODS_OVERDUE = 2
