"""What Restate knows, read over its two doors: the ingress (the agents' own handlers) and the
admin API's SQL introspection (sys_invocation, sys_journal, sys_journal_events, state).

One module a job: `errors` (what a person is told, in one line), `http` (the two doors),
`health` (is the service down, since when), `paused` (calls Restate paused, which wait for a
person), `ingress` (calling the agents, with the outage handling), `read_models` (the SQL
reads, their names from `loop/names.py`), `agents` (a SKU's record and a run's view, from
Restate's storage while the service is down), and `client` (`RestateClient`, the one object
the faces hold).
"""
