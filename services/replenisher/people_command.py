"""`replenisher people check|hash-password` and `replenisher audit`: the team's matrix and the audit log.

- `people check FILE` reads the authority matrix as the console does and says what it holds, or
  exactly what is wrong with it (exit 2), so a change can be checked before it goes live.
- `people hash-password` turns a password (from the terminal, or one line on stdin) into the
  argon2 hash a person's `password_hash` takes; the password itself is never printed or stored.
- `audit` prints the audit log of a range of days (UTC) as text, CSV or JSON, and says where its
  chain of digests does not hold (exit 1): an entry changed or removed after it was written.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import httpx

from replenisher.domain.audit import to_csv, to_json
from replenisher.domain.authority import AuthorityFileError, AuthorityMatrix, load_authority
from replenisher.identity.passwords import WeakPassword, hash_password
from replenisher.operations.audit import BadRange, days_between, read_day
from replenisher.operations.restate.errors import OperatorError

EXIT_BROKEN = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3  # Restate could not be read, as the other commands say it


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    people = sub.add_parser("people", help="the team's authority matrix: check it, hash a password for it")
    actions = people.add_subparsers(dest="people_command", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="read a matrix file as the console would, and say what it holds")
    check.add_argument("file", type=Path)
    actions.add_parser("hash-password", help="an argon2 hash for a person's password_hash (reads the password)")

    audit = sub.add_parser("audit", parents=[common], help="the audit log of a range of days (UTC)")
    audit.add_argument("--since", type=date.fromisoformat, help="first day, YYYY-MM-DD (default: today)")
    audit.add_argument("--until", type=date.fromisoformat, help="last day, YYYY-MM-DD (default: today)")
    audit.add_argument("--format", choices=["text", "csv", "json"], default="text", help="how to print it (text)")


def run_people(args: argparse.Namespace) -> int:
    if args.people_command == "check":
        try:
            matrix = load_authority(args.file)
        except AuthorityFileError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_USAGE
        print(describe(matrix))
        return 0
    password = getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    try:
        print(hash_password(password))
    except WeakPassword as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def describe(matrix: AuthorityMatrix) -> str:
    lines = [f"{len(matrix.people)} people:"]
    for p in sorted(matrix.people, key=lambda p: (-p.limit, p.id)):
        limits = f", up to {p.limit:,.2f}" if p.may("approve") else ""
        limits += "".join(f", {s}: {v:,.2f}" for s, v in sorted(p.supplier_limits.items()))
        sign_in = "password" if p.password_hash else "company account"
        lines.append(f"  {p.id} ({p.name}, {p.email}): {', '.join(p.roles)}{limits}; signs in with {sign_in}")
    threshold = matrix.two_person_threshold
    lines.append(f"two approvers above {threshold:,.2f}" if threshold is not None else "one approver for any amount")
    for d in matrix.delegations:
        lines.append(
            f"{d.from_} away {d.starts} to {d.ends}: {d.to} approves for them" + (f" ({d.note})" if d.note else "")
        )
    return "\n".join(lines)


def run_audit(args: argparse.Namespace, ingress_url: str) -> int:
    today = datetime.now(UTC).date()
    try:
        days = days_between(args.since or today, args.until or args.since or today)
    except BadRange as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_print_audit(ingress_url, days, args.format))
    except OperatorError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE


async def _print_audit(ingress_url: str, days: list[str], form: str) -> int:
    async with httpx.AsyncClient() as client:
        read = [await read_day(ingress_url, day, client=client) for day in days]
    entries = [e for r in read for e in r.entries]
    if form == "csv":
        sys.stdout.write(to_csv(entries))
    elif form == "json":
        sys.stdout.write(to_json(entries))
    else:
        for e in entries:
            when = datetime.fromtimestamp(e.at, UTC).strftime("%Y-%m-%d %H:%M:%S")
            acting = f" acting for {e.acting_for}" if e.acting_for else ""
            reason = f": {e.reason}" if e.reason else ""
            print(f"{when} {e.event} {e.outcome} by {e.who}{acting} via {e.via} {e.source} - {e.what}{reason}")
        print(f"{len(entries)} entries over {len(days)} day{'s' if len(days) != 1 else ''}", file=sys.stderr)
    broken = [f"{r.day}: {b}" for r in read for b in r.breaks]
    for line in broken:
        print(f"chain broken: {line}", file=sys.stderr)
    return EXIT_BROKEN if broken else 0
