"""`replenisher replay`: recorded runs re-decided by a decider, from their archives.

Archives come from files (or directories of them) or from Restate, where the `RunArchive`
objects keep finished runs' and the running workflows their own (read through the admin API's
state table: operator access, no handler).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from replenisher.domain.archive import RunArchive
from replenisher.domain.decisions import Decider
from replenisher.replay.core import ArchiveUnreadable, ReplayReport, read_archive, replay
from replenisher.timeline import replayed

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,200}$")
SINCE = re.compile(r"^(\d+(?:\.\d+)?)([dhm])$")
UNIT_SECONDS = {"d": 86_400.0, "h": 3_600.0, "m": 60.0}


class ReplayError(Exception):
    """Nothing to replay, or the decider cannot be built: said plainly, exit 2."""


class Summary(BaseModel):
    runs: int
    turns: int
    agree: int
    diverged: int
    usd: float
    input_tokens: int
    output_tokens: int

    @classmethod
    def of(cls, reports: Iterable[ReplayReport]) -> Summary:
        reports = list(reports)
        return cls(
            runs=len(reports),
            turns=sum(r.turns for r in reports),
            agree=sum(r.agree for r in reports),
            diverged=sum(r.diverged for r in reports),
            usd=sum(r.usd for r in reports),
            input_tokens=sum(r.input_tokens for r in reports),
            output_tokens=sum(r.output_tokens for r in reports),
        )

    def line(self) -> str:
        return (
            f"replay: runs={self.runs} turns={self.turns} agree={self.agree} diverged={self.diverged} "
            f"cost_usd={self.usd:.4f}"
        )


def parse_since(text: str) -> float:
    found = SINCE.match(text)
    if found is None:
        raise ReplayError(f"--since takes a number of days, hours or minutes, e.g. 7d, 12h, 30m; not {text!r}")
    return float(found.group(1)) * UNIT_SECONDS[found.group(2)]


def archive_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else [path]


def load_file(path: Path) -> RunArchive:
    try:
        return read_archive(json.loads(path.read_text()))
    except (OSError, ValueError, ValidationError) as e:
        raise ReplayError(f"{path}: not a run archive this code can read: {e}") from e


def from_restate(admin_url: str, run_id: str | None = None) -> list[RunArchive]:
    """Archives Restate keeps: a finished run's in its `RunArchive` object, a running run's in
    its own workflow state (up to the wait it is in); the object's when there are both."""
    from replenisher.stack.admin import sql

    query = (
        "SELECT service_name, service_key, value_utf8 FROM state WHERE key = 'archive' "
        "AND service_name IN ('RunArchive', 'Replenish')"
    )
    if run_id is not None:
        if not RUN_ID.match(run_id):
            raise ReplayError(f"not a run id: {run_id!r}")
        query += f" AND service_key = '{run_id}'"
    try:
        rows = sql(admin_url, query)
    except Exception as e:
        raise ReplayError(f"cannot read archives from Restate's admin API at {admin_url}: {e}") from e
    found: dict[str, RunArchive] = {}
    for row in sorted(rows, key=lambda r: r["service_name"] == "RunArchive"):
        try:
            found[row["service_key"]] = read_archive(json.loads(row["value_utf8"]))
        except (ValueError, ValidationError, ArchiveUnreadable) as e:
            print(f"note: skipped an archive this code cannot read: {e}", file=sys.stderr)
    return list(found.values())


def gather(targets: list[str], every: bool, since: str | None, admin_url: str) -> list[RunArchive]:
    archives: list[RunArchive] = []
    if every:
        archives += from_restate(admin_url)
    for target in targets:
        path = Path(target)
        if path.exists():
            archives += [load_file(p) for p in archive_files(path)]
        else:
            found = from_restate(admin_url, target)
            if not found:
                raise ReplayError(f"no archive for run {target!r} in Restate (nor a file of that name)")
            archives += found
    if since is not None:
        cutoff = time.time() - parse_since(since)
        archives = [a for a in archives if (a.ended_at or a.started_at or 0.0) >= cutoff]
    if not archives:
        raise ReplayError("no archived runs to replay")
    return sorted(archives, key=lambda a: (a.started_at or 0.0, a.run_id))


def build_decider(name: str, model: str | None) -> Decider:
    if name == "offline":
        from replenisher.domain.policy import OfflinePolicy

        return OfflinePolicy()
    from replenisher.deciders.claude import ClaudeDecider
    from replenisher.wiring import bootstrap, price_override

    parts = bootstrap()
    s = parts.settings
    if s.anthropic_api_key is None or not s.anthropic_api_key.get_secret_value():
        raise ReplayError("--decider claude needs ANTHROPIC_API_KEY")
    # The composition root's client: the service's key, base URL, retries and timeout.
    return ClaudeDecider(
        parts.claude_client, model or s.claude_model, max_tokens=s.claude_max_tokens, price=price_override(s)
    )


def shown_args(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=True) if args else ""


def report_lines(report: ReplayReport) -> list[str]:
    who = report.decider + (f" ({report.model})" if report.model else "")
    head = f"{report.run_id}: {who}"
    first = report.first_divergence
    if first is None:
        outcome = report.recorded_outcome or "none yet, the run is still going"
        lines = [f"{head} agrees with the record on all {report.turns} turns (recorded outcome: {outcome})"]
    else:
        lines = [f"{head} parts from the record at turn {first.turn}, after {first.turn} agreeing turns"]
        for label, choice in (("recorded", first.recorded), ("replayed", first.replayed)):
            by = choice.decider + (f" {choice.model}" if choice.model else "")
            lines.append(f"  {label}: {choice.tool} {shown_args(choice.args)}".rstrip() + f"  [{by}]")
            lines.append(f"    why: {choice.reason}")
        if report.diverged > 1 or report.stopped != "diverged":
            lines.append(f"  went on: {report.agree} agree, {report.diverged} diverged of {report.turns} turns")
    if report.rules_took and report.decider != "offline":
        why = f"{report.decider} could not answer, or was refused"
        lines.append(f"  the rules took {report.rules_took} of {report.turns} turns: {why}")
    if report.stopped == "record no longer applies":
        lines.append(f"  stopped: {report.stop_detail}")
    if report.usd or report.input_tokens:
        lines.append(
            f"  model calls: {report.input_tokens} in / {report.output_tokens} out tokens, {report.usd:.4f} USD"
        )
    return lines


def side_by_side(archive: RunArchive, report: ReplayReport) -> list[str]:
    """The recorded run and its replay as two columns of turns, the turn where they part marked."""
    return replayed.render_text(replayed.build(archive, report))


async def replay_all(archives: list[RunArchive], decider: Decider, keep_going: bool) -> list[ReplayReport]:
    return [await replay(archive, decider, keep_going=keep_going) for archive in archives]


def run(args: argparse.Namespace, admin_url: str) -> int:
    """Exit 0 when every replayed turn agreed, 1 when any diverged, 2 when nothing could be replayed."""
    try:
        if not args.targets and not args.all:
            raise ReplayError("name a run id or an archive file, or --all")
        archives = gather(args.targets, args.all, args.since, admin_url)
        decider = build_decider(args.decider, args.model)
        if args.html and not Path(args.html).expanduser().resolve().parent.is_dir():
            raise ReplayError(f"cannot write {args.html}: there is no folder {Path(args.html).resolve().parent}")
    except ReplayError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    reports = asyncio.run(replay_all(archives, decider, args.keep_going))
    if args.side_by_side and not args.json:
        for archive, report in zip(archives, reports, strict=True):
            print("\n".join([f"{archive.run_id}: the recorded run beside its replay", *side_by_side(archive, report)]))
    if args.html:
        views = [replayed.build(archive, report) for archive, report in zip(archives, reports, strict=True)]
        Path(args.html).write_text(replayed.render_html(views))
        if not args.json:
            print(f"the recorded run{'s' if len(views) > 1 else ''} beside the replay written to {args.html}")
    summary = Summary.of(reports)
    if args.json:
        out = {"summary": summary.model_dump(), "runs": [r.model_dump(mode="json") for r in reports]}
        print(json.dumps(out, indent=2))
    else:
        for report in reports:
            print("\n".join(report_lines(report)))
        if len(reports) > 1:
            print(summary.line())
    return 0 if summary.diverged == 0 else 1


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "replay",
        parents=[common],
        help="re-decide recorded runs with a decider; results come from the archive, never the world",
    )
    p.add_argument("targets", nargs="*", metavar="RUN", help="run ids (archives in Restate), archive files or dirs")
    p.add_argument("--all", action="store_true", help="every run archived in Restate")
    p.add_argument("--since", metavar="AGE", help="only runs that ended within this age: 7d, 12h, 30m")
    p.add_argument("--decider", choices=["offline", "claude"], default="offline", help="who decides (offline)")
    p.add_argument("--model", help="the Claude model (default $REPLENISHER_CLAUDE_MODEL)")
    p.add_argument(
        "--side-by-side",
        action="store_true",
        help="draw each run's turns beside the replay's, marking the turn where they part",
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write the recorded runs beside their replays as a self-contained HTML/SVG page to FILE",
    )
    p.add_argument(
        "--continue",
        dest="keep_going",
        action="store_true",
        help="after a divergence go on with the new choice, comparing, while the record still answers",
    )
