"""A run drawn over time, for people: read from what Restate and the run recorded, shown as text or HTML."""
