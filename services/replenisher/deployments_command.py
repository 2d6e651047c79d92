"""`replenisher deployments [prune]`: the registered deployments, what runs on each, and removing drained ones.

- `deployments` lists each deployment with the code version it runs, what is in flight on it by
  kind and by wait, whether it is drained, and whether it is safe to remove (`--json` or
  `--format json` for scripts).
- `deployments prune [ID ...]` removes the drained ones that are not the newest for their
  services (or only those named, each of which must be safe), after asking (`--yes` does not ask).
  It never removes one with anything in flight: Restate's admin API would, so it checks first.

Exit codes as the other commands: 0 done; 1 refused, not found or not confirmed (nothing
removed), or a deployment kept after all; 3 Restate not reachable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable

from replenisher.operations.deployments import DeploymentView, Overview, PruneResult, chosen, overview, prune
from replenisher.operations.restate.client import RestateClient
from replenisher.operations.restate.errors import OperatorError, Unreachable
from replenisher.operations.settings_audit import record_settings_changes
from replenisher.timeline.format import clock

EXIT_REFUSED = 1
EXIT_UNREACHABLE = 3


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "deployments",
        parents=[common],
        help="each deployment: its code version, what runs on it, whether it is drained and safe to remove",
    )
    p.add_argument("--format", choices=["text", "json"], default="text", help="how to print it (text)")
    actions = p.add_subparsers(dest="deployments_command", metavar="ACTION")
    prune_parser = actions.add_parser(
        "prune", parents=[unset(common)], help="remove drained deployments that no service's new calls go to"
    )
    prune_parser.add_argument("ids", nargs="*", metavar="ID", help="only these (each must be safe to remove)")
    prune_parser.add_argument("--yes", action="store_true", help="do not ask before removing")
    prune_parser.add_argument(
        "--format", choices=["text", "json"], default=argparse.SUPPRESS, help="how to print it (text)"
    )
    for command in (p, prune_parser):
        command.set_defaults(command_parser=command)


def unset(common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`common`'s options for a nested action, with no defaults of their own: given before the action
    (`deployments --json prune`) they keep their value rather than being reset by the action's parser."""
    nested = argparse.ArgumentParser(add_help=False)
    for action in common._actions:
        kwargs: dict[str, object] = {"default": argparse.SUPPRESS, "help": action.help, "dest": action.dest}
        if isinstance(action, argparse._StoreTrueAction):
            nested.add_argument(*action.option_strings, action="store_true", **kwargs)  # type: ignore[arg-type]
        else:
            nested.add_argument(*action.option_strings, metavar=action.metavar, **kwargs)  # type: ignore[arg-type]
    return nested


def run(args: argparse.Namespace, ingress_url: str, admin_url: str, ask: Callable[[str], bool] | None = None) -> int:
    try:
        return asyncio.run(_run(args, ingress_url, admin_url, ask or confirm))
    except Unreachable as e:
        print(f"error: {e} (start it with `make up`)", file=sys.stderr)
        return EXIT_UNREACHABLE
    except OperatorError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_REFUSED


def confirm(question: str) -> bool:
    """Asked on stderr, answered by a line on stdin (none: no)."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


async def _run(args: argparse.Namespace, ingress_url: str, admin_url: str, ask: Callable[[str], bool]) -> int:
    as_json = args.json or args.format == "json"
    async with RestateClient(ingress_url, admin_url) as client:
        found = await overview(client)
        if args.deployments_command != "prune":
            print(json.dumps(found.model_dump(mode="json"), indent=2) if as_json else describe(found))
            return 0
        picked = chosen(found, args.ids)
        if picked:
            # What a deployment's settings changed goes into the audit log before its record can go.
            await record_settings_changes(await client.registered_deployments(), ingress_url, client=client.http.client)
        if not picked:
            if as_json:
                print(json.dumps(PruneResult().model_dump(mode="json"), indent=2))
            else:
                print("nothing to prune: no deployment is drained and superseded")
                for d in found.deployments:
                    print(f"  {d.id} ({version(d)}): {d.why}")
            return 0
        if not args.yes:
            for d in picked:
                print(f"to remove: {d.id} ({version(d)}) at {d.endpoint}: {d.why}", file=sys.stderr)
            n = len(picked)
            if not ask(f"remove {n} deployment{'s' * (n != 1)} from Restate?"):
                print("nothing removed", file=sys.stderr)
                return EXIT_REFUSED
        result = await prune(client, picked)
    if as_json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        for deployment_id in result.removed:
            print(f"removed {deployment_id}")
        for deployment_id, why in result.kept.items():
            print(f"kept {deployment_id}: {why}")
        print("stop the removed deployments' processes once removed; Restate no longer calls them")
    return EXIT_REFUSED if result.kept else 0


def version(d: DeploymentView) -> str:
    if d.code_version is None:
        return "code version unknown"
    return f"code {d.code_version}" + (" from its runs' turns" if d.code_version_from == "turns" else "")


def describe(found: Overview) -> str:
    if not found.deployments:
        return "no deployment is registered"
    lines = []
    for d in found.deployments:
        lines.append(f"{d.id}  {version(d)}  {d.endpoint}  registered {clock(d.created_at)}")
        if d.newest_for:
            lines.append(f"  newest for: {', '.join(d.newest_for)}")
        if d.in_flight:
            kinds = ", ".join(f"{k} {n}" for k, n in d.by_kind.items())
            waits = ", ".join(f"{w} {n}" for w, n in d.by_wait.items())
            lines.append(f"  in flight: {len(d.in_flight)} ({kinds}); by wait: {waits}")
        else:
            lines.append("  in flight: none (drained)")
        lines.append(f"  safe to remove: {'yes' if d.safe_to_remove else 'no'} ({d.why})")
    safe = sum(d.safe_to_remove for d in found.deployments)
    drained = sum(d.drained for d in found.deployments)
    if found.not_started:
        lines.append(f"{found.not_started} invocation(s) not started yet: they go to the newest deployment")
    lines.append(
        f"deployments: registered={len(found.deployments)} drained={drained} safe_to_remove={safe}"
        + (" (`replenisher deployments prune` removes them)" if safe else "")
    )
    return "\n".join(lines)
