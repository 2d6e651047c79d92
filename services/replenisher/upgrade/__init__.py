"""`replenisher upgrade-check`: replay every waiting run of a copy of Restate's data against the candidate code.

- `corpus`: where the copy comes from (a data dir, a corpus archive, the stopped local stack), its manifest.
- `recorder`: the one outside party the candidate may reach; it refuses and counts every call.
- `replay`: a private restate-server on the copy, the candidate beside it, every waiting invocation
  moved onto the candidate and judged from Restate's own records.
- `report`: the per-invocation lines and the summary line.
- `command`: the CLI's subcommand.
"""
