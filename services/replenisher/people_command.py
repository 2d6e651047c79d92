"""`replenisher people check|hash-password|new-token-key|issue-token` and `replenisher audit`.

- `people check FILE` reads the authority matrix as the console does and says what it holds, or
  exactly what is wrong with it (exit 2), so a change can be checked before it goes live.
- `people hash-password` turns a password (from the terminal, or one line on stdin) into the
  argon2 hash a person's `password_hash` takes; the password itself is never printed or stored.
- `people new-token-key FILE` writes the key personal tokens are made and checked with (the
  service's and the console's REPLENISHER_PERSONAL_TOKEN_KEY_FILE); `people issue-token PERSON`
  makes one person's token with it, for whoever runs the key (people make their own in the console).
- `audit` prints the audit log of a range of days (UTC) as text, CSV or JSON, and says where its
  chain of digests does not hold (exit 1): an entry changed or removed after it was written.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path

import httpx

from replenisher.domain.audit import to_csv, to_json
from replenisher.domain.authority import AuthorityFileError, AuthorityMatrix, load_authority
from replenisher.domain.credentials import BadToken, issue, load_token_key, new_token_key
from replenisher.identity.passwords import WeakPassword, hash_password
from replenisher.inbound.signing import write_private
from replenisher.operations.audit import BadRange, days_between, read_day
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import OperatorError
from replenisher.operations.settings_audit import record_settings_changes

EXIT_BROKEN = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3  # Restate could not be read, as the other commands say it


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    people = sub.add_parser("people", help="the team's authority matrix: check it, hash a password for it")
    actions = people.add_subparsers(dest="people_command", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="read a matrix file as the console would, and say what it holds")
    check.add_argument("file", type=Path)
    actions.add_parser("hash-password", help="an argon2 hash for a person's password_hash (reads the password)")
    key = actions.add_parser(
        "new-token-key", help="write a fresh personal token key (REPLENISHER_PERSONAL_TOKEN_KEY_FILE), mode 0600"
    )
    key.add_argument("file", type=Path)
    issue_token = actions.add_parser(
        "issue-token", help="make a person's personal token with the key file (as the console's Tokens page does)"
    )
    issue_token.add_argument("person")
    issue_token.add_argument("--key-file", type=Path, required=True, help="the personal token key file")
    issue_token.add_argument("--people", type=Path, help="the authority matrix: refuse a person not in it")
    issue_token.add_argument("--days", type=float, default=30.0, help="how long it lasts (default 30, at most 366)")

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
    if args.people_command == "new-token-key":
        return new_key(args.file)
    if args.people_command == "issue-token":
        return issue_for(args.person, args.key_file, args.people, args.days)
    password = getpass.getpass("password: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\n")
    try:
        print(hash_password(password))
    except WeakPassword as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def new_key(path: Path) -> int:
    if path.exists():
        print(f"error: {path} exists: a new key would void every token made with it (remove it first)", file=sys.stderr)
        return EXIT_USAGE
    write_private(path, new_token_key() + "\n")
    print(f"wrote a personal token key to {path} (give it to the service and the console)")
    return 0


def issue_for(person: str, key_file: Path, people: Path | None, days: float) -> int:
    """Print `person`'s token; with `--people`, only for someone in the matrix who may approve."""
    try:
        if people is not None:
            found = load_authority(people).find(person)
            if found is None or not found.may("approve"):
                print(f"error: {person} is not an approver in {people}: a token would approve nothing", file=sys.stderr)
                return EXIT_USAGE
        print(issue(load_token_key(key_file), person, now=time.time(), days=days))
    except (AuthorityFileError, BadToken) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def describe(matrix: AuthorityMatrix) -> str:
    lines = [f"{len(matrix.people)} people:"]
    for p in sorted(matrix.people, key=lambda p: (-p.limit, p.id)):
        limits = f", up to {p.limit:,.2f}" if p.may("approve") else ""
        limits += "".join(f", {s}: {v:,.2f}" for s, v in sorted(p.supplier_limits.items()))
        sign_in = "password" if p.password_hash else "company account"
        revoked = f"; personal tokens made before {p.tokens_not_before.isoformat()} void" if p.tokens_not_before else ""
        lines.append(f"  {p.id} ({p.name}, {p.email}): {', '.join(p.roles)}{limits}; signs in with {sign_in}{revoked}")
    threshold = matrix.two_person_threshold
    lines.append(f"two approvers above {threshold:,.2f}" if threshold is not None else "one approver for any amount")
    for d in matrix.delegations:
        lines.append(
            f"{d.from_} away {d.starts} to {d.ends}: {d.to} approves for them" + (f" ({d.note})" if d.note else "")
        )
    return "\n".join(lines)


def run_audit(args: argparse.Namespace, ingress_url: str, admin_url: str) -> int:
    today = datetime.now(UTC).date()
    try:
        days = days_between(args.since or today, args.until or args.since or today)
    except BadRange as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_print_audit(ingress_url, admin_url, days, args.format))
    except OperatorError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE


async def _print_audit(ingress_url: str, admin_url: str, days: list[str], form: str) -> int:
    async with httpx.AsyncClient() as client:
        await note_settings_changes(ingress_url, admin_url, client)
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


async def note_settings_changes(ingress_url: str, admin_url: str, client: httpx.AsyncClient) -> None:
    """Record the service's settings changes not yet in the log (`operations.settings_audit`) before it
    is read; a Restate admin API that cannot be read leaves the log as it is, and says so."""
    try:
        async with RestateClient(ingress_url, admin_url, client=client) as restate:
            await record_settings_changes(await restate.registered_deployments(), ingress_url, client=client)
    except OperatorError as e:
        print(f"warning: settings changes not checked: {e}", file=sys.stderr)
