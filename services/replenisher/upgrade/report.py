"""What an upgrade check prints: a line per invocation, then the summary line CI and people read."""

from __future__ import annotations

from replenisher.upgrade.replay import Result, Verdict


def _where(v: Verdict) -> str:
    if v.at_command is None:
        return ""
    named = f" {v.at_name!r}" if v.at_name else ""
    kind = f" ({v.at_type})" if v.at_type else ""
    return f" at command {v.at_command}{named}{kind}"


def line(v: Verdict) -> str:
    head = f"{v.target} {v.id}"
    if v.outcome == "diverged":
        code = f"{v.error_code} " if v.error_code else ""
        why = " ".join((v.failure or "").split())
        return f"DIVERGED  {head}: of {v.journal_commands} journaled commands, failed{_where(v)}: {code}{why}"
    if v.past_end:
        went = f"replayed all {v.journal_commands} commands and went on to {v.reached}"
        if v.error_code:
            went += f", then failed{_where(v)}: {v.error_code}"
        return f"replayed  {head}: {went}, now {v.status}"
    return f"replayed  {head}: all {v.journal_commands} journaled commands, now {v.status}"


def summary(result: Result) -> str:
    total = len(result.verdicts)
    diverged = len(result.diverged)
    return (
        f"upgrade-check: invocations={total} replayed={total - diverged} diverged={diverged} "
        f"outside_calls={len(result.outside_calls)}"
    )


def render(result: Result) -> list[str]:
    lines = [line(v) for v in result.verdicts]
    if result.outside_calls:
        shown = ", ".join(result.outside_calls[:5]) + (" ..." if len(result.outside_calls) > 5 else "")
        lines.append(f"refused outside calls (runs past their journal's end): {shown}")
    return [*lines, summary(result)]
