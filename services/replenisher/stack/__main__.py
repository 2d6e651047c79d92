"""`python -m replenisher.stack up|down|status|restart NAME`: the local stack from a shell (and `make`).

`restart service` stops and starts only the replenisher service, with the settings `up` gave
it, keeping Restate and the world (and the world's in-memory state) running.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from replenisher.config import service_workers, variable
from replenisher.domain.calendar import utc_instant
from replenisher.stack.install import RestateInstallError
from replenisher.stack.local import ONE_DAY_SECONDS, PROCESS_ALIASES, Stack, StackConfig, StackError
from replenisher.stack.ports import PortInUseError, RestatePorts
from replenisher.stack.processes import DEFAULT_SERVER, SERVER_SETTING, SERVERS, ProcessFailedError

DEFAULT_CONFIG_FILE = Path("restate.toml")


def _parser() -> argparse.ArgumentParser:
    defaults = StackConfig()
    parser = argparse.ArgumentParser(prog="python -m replenisher.stack", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status", "restart"])
    parser.add_argument(
        "process",
        nargs="?",
        help="with restart: the process to restart, as `status` names it (`service` is the replenisher)",
    )
    parser.add_argument("--state-dir", type=Path, default=defaults.state_dir, help="data, logs, pids")
    parser.add_argument("--ingress-port", type=int, default=defaults.restate.ingress)
    parser.add_argument("--admin-port", type=int, default=defaults.restate.admin)
    parser.add_argument("--node-port", type=int, default=defaults.restate.node)
    parser.add_argument("--service-port", type=int, default=defaults.service_port)
    parser.add_argument("--world-port", type=int, default=defaults.world_port)
    parser.add_argument("--inbound-port", type=int, default=defaults.inbound_port, help="the inbound endpoint")
    parser.add_argument(
        "--inbound-tls-cert",
        type=Path,
        default=None,
        help="PEM certificate (chain) the inbound endpoint serves HTTPS with; needs --inbound-tls-key",
    )
    parser.add_argument("--inbound-tls-key", type=Path, default=None, help="the certificate's PEM private key")
    parser.add_argument(
        "--day-seconds",
        type=float,
        default=float(os.environ.get("REPLENISHER_DAY_SECONDS", ONE_DAY_SECONDS)),
        help="length of one calendar day in seconds (default: $REPLENISHER_DAY_SECONDS or a real day)",
    )
    parser.add_argument(
        "--calendar-start",
        type=utc_instant,
        default=None,
        help="the calendar date-time a compressed clock starts at, ISO (default: now)",
    )
    parser.add_argument("--catalogue", default=os.environ.get("WORLD_CATALOGUE"), help="world catalogue")
    parser.add_argument("--service-app", default=defaults.service_app, help="ASGI app, module:attr or module:factory()")
    parser.add_argument("--world-app", default=defaults.world_app, help="ASGI app, module:attr")
    parser.add_argument(
        "--server",
        choices=SERVERS,
        default=None,
        help=f"the service's ASGI server (default: ${SERVER_SETTING}, else {DEFAULT_SERVER})",
    )
    parser.add_argument(
        "--service-workers",
        type=_workers,
        default=None,
        help="the service's worker processes (default: $REPLENISHER_SERVICE_WORKERS, else 1)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None,
        help="restate-server config file (default: ./restate.toml if present)",
    )
    return parser


def _workers(text: str) -> int:
    try:
        return service_workers({variable("service_workers"): text})
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _config(args: argparse.Namespace) -> StackConfig:
    return StackConfig(
        state_dir=args.state_dir,
        restate=RestatePorts(ingress=args.ingress_port, admin=args.admin_port, node=args.node_port),
        service_port=args.service_port,
        world_port=args.world_port,
        inbound_port=args.inbound_port,
        inbound_tls_cert=args.inbound_tls_cert,
        inbound_tls_key=args.inbound_tls_key,
        day_seconds=args.day_seconds,
        calendar_start=args.calendar_start,
        catalogue=args.catalogue,
        config_file=args.config,
        service_app=args.service_app,
        world_app=args.world_app,
        **({"server": args.server} if args.server else {}),
        **({"service_workers": args.service_workers} if args.service_workers is not None else {}),
    )


def _print_status(stack: Stack) -> int:
    statuses = stack.status()
    if not statuses:
        print(f"stack is down (no {stack.state_file})")
        return 1
    for s in statuses:
        state = "running" if s.running else "DEAD"
        print(f"{s.name:<15} {state:<8} pid {s.pid:<8} {s.url:<28} log {s.log}")
        if s.leftovers:
            pids = ", ".join(str(pid) for pid in s.leftovers)
            print(f"  but its group's pid {pids} still runs and may hold its port: `down` or `restart` stops it")
    return 0 if all(s.running for s in statuses) else 1


def first_call(cfg: StackConfig) -> str:
    """A call that works on this stack's world: a SKU its catalogue holds, else how to add one."""
    if cfg.catalogue == "demo":
        return f"e.g. curl -X POST {cfg.ingress_url}/SkuAgent/SKU-101/check"
    return "the world's catalogue is empty: docs/world-api.md, Setting a scenario up (or --catalogue demo)"


def main(argv: list[str] | None = None) -> int:
    try:
        parser = _parser()
    except ValueError as exc:  # the defaults' environment: a bad REPLENISHER_SERVICE_WORKERS or REPLENISHER_SERVER
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if (args.command == "restart") != (args.process is not None):
        aliases = ", ".join(f"{a} = {n}" for a, n in PROCESS_ALIASES.items())
        parser.error(f"a process name goes with restart, and only with it (e.g. restart service; {aliases})")
    if (args.inbound_tls_cert is None) != (args.inbound_tls_key is None):
        parser.error("--inbound-tls-cert and --inbound-tls-key go together: the door serves TLS with both")
    for given in (args.inbound_tls_cert, args.inbound_tls_key):
        if given is not None and not given.is_file():
            parser.error(f"{given}: no such file")
    stack = Stack(_config(args))
    try:
        if args.command == "restart":
            record = stack.restart(args.process)
            print(f"restarted {record.name}: pid {record.pid} {record.url}")
            return _print_status(stack)
        if args.command == "up":
            stack.up()
            cfg = stack.config
            _print_status(stack)
            print(f"\ningress  {cfg.ingress_url}   {first_call(cfg)}")
            print(f"admin    {cfg.admin_url}   restate CLI: RESTATE_ADMIN_URL={cfg.admin_url} restate ...")
            print(f"inbound  {cfg.inbound_url}   outside parties' signed messages (secrets: {cfg.secrets_file})")
            print(f"data     {cfg.data_dir}   (kept by `down`)")
            return 0
        if args.command == "down":
            stopped = stack.down()
            print("stopped: " + (", ".join(s.name for s in stopped) if stopped else "nothing was running"))
            return 0
        return _print_status(stack)
    except (StackError, PortInUseError, ProcessFailedError, RestateInstallError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
