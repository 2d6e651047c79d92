"""`replenisher upgrade-check`: is the candidate code (this checkout) safe for the runs waiting now?

    replenisher upgrade-check tests/fixtures/upgrade/corpus.tar.gz   # the committed corpus
    make down && replenisher upgrade-check --from-stack             # the local stack's own runs

Exit 0: every in-flight invocation replayed; 1: some diverged (listed); 2: no such data; 3: the copy
or the candidate could not be used (another Restate version, a stack still running, a candidate that
does not start). The source is copied first and only the copy is touched; the candidate is
registered with a private restate-server on the copy, never with a live one.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from replenisher.stack.admin import AdminError
from replenisher.stack.local import SERVICE_APP, Stack, StackConfig
from replenisher.stack.processes import SERVERS, service_server
from replenisher.upgrade.corpus import SourceError, VersionError, copy_source, stack_source
from replenisher.upgrade.replay import CandidateError, CopyError, Options, check
from replenisher.upgrade.report import render

# The restate-server config `make up` runs with (`python -m replenisher.stack`'s default): the data was made under it.
DEFAULT_CONFIG_FILE = Path("restate.toml")
EXIT_DIVERGED = 1
EXIT_USAGE = 2
EXIT_UNUSABLE = 3


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = sub.add_parser(
        "upgrade-check",
        help="replay every waiting run of a copy of Restate's data against this checkout's code",
    )
    cmd.add_argument("source", nargs="?", type=Path, help="a Restate data dir or a corpus .tar.gz")
    cmd.add_argument(
        "--from-stack", action="store_true", help="copy the local stack's data (stop it first with `make down`)"
    )
    cmd.add_argument("--state-dir", type=Path, default=Path(".stack"), help="the local stack's dir (default .stack)")
    cmd.add_argument("--candidate-app", default=SERVICE_APP, help=f"the candidate's ASGI app (default {SERVICE_APP})")
    cmd.add_argument("--server", choices=SERVERS, default=None, help="the candidate's ASGI server")
    cmd.add_argument("--settle-seconds", type=float, default=120.0, help="how long each phase may take (default 120)")
    cmd.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None,
        help="the restate-server config the data was made with (default: ./restate.toml if present, as `make up`)",
    )
    cmd.add_argument("--keep", action="store_true", help="keep the copy and the logs, and say where")


def _source(args: argparse.Namespace) -> Path:
    if args.from_stack == (args.source is not None):
        raise SourceError("give a data dir or corpus archive, or --from-stack (one of them)")
    if args.source is not None:
        return Path(args.source)
    if Stack(StackConfig(state_dir=args.state_dir)).is_up():
        raise CopyError(
            f"the local stack in {args.state_dir} is running: stop it with `make down` (its data then stays), "
            "run the check, and `make up` again"
        )
    return stack_source(args.state_dir)


def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="upgrade-check-"))
    try:
        copy = copy_source(_source(args), work)
        extra: dict[str, str] = {}
        if args.from_stack:
            # What `make up` gives the service besides this shell's settings: its door key. (The address
            # the data records is checked once the private Restate can say it: the stack is down.)
            stack = StackConfig(state_dir=args.state_dir)
            if stack.door_key_file.is_file() and "REPLENISHER_DOOR_KEY_FILE" not in copy.manifest.service_env:
                extra["REPLENISHER_DOOR_KEY_FILE"] = str(stack.door_key_file.resolve())
        options = Options(
            candidate_app=args.candidate_app,
            server=args.server or service_server(),
            settle_seconds=args.settle_seconds,
            work=work,
            config_file=args.config,
            extra_env=extra,
        )
        result = check(copy, options)
    except SourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (VersionError, CopyError, CandidateError, AdminError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    finally:
        if args.keep:
            print(f"the copy and its logs are in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    for text in render(result):
        print(text)
    return EXIT_DIVERGED if result.diverged else 0
