"""From results.json to what a reader sees: PNG plots, one ratio line per metric, and the table on the
docs' benchmarks page (docs/benchmarks.md, between its bench markers; README.md is never touched).

Ratios are read as "the peer's figure is Nx ours": above 1 the peer costs more (time, CPU,
memory, disk) or, for throughput, pushes more through.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

JSON = dict[str, Any]
Say = Callable[[str], None]

PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
FULL_RUN = "30"
# "Does not grow": under 2 KB of service memory per extra waiting run (20 MB at 10,000).
FLAT_KB = 2.0
JUDGE_FLAT_FROM = 1000
OURS_HOT, OURS_COLD = "restate", "restate-suspending"
PEERS = ["temporal", "dbos-postgres", "dbos-sqlite", "asyncio"]
COLORS = {
    "restate": "#d62728",
    "restate-suspending": "#ff7f0e",
    "temporal": "#1f77b4",
    "dbos-postgres": "#2ca02c",
    "dbos-sqlite": "#17becf",
    "asyncio": "#7f7f7f",
}


# --- reading the results -------------------------------------------------------------------


def mem(point: JSON, role: str) -> float | None:
    """Memory of a process tree: PSS (RSS with shared pages split; PostgreSQL's shared buffers once)."""
    m = point["memory_mb"].get(role)
    return m["pss_mb"] if m else None


def cpu(result: JSON, roles: tuple[str, ...] = ("service", "engine")) -> float:
    per = result["cpu_ms_per_op"]
    return sum(per.get(r, 0.0) for r in roles)


def wake_of(results: JSON, system: str, state: str, steps: str = FULL_RUN) -> JSON | None:
    """Ours: hot from `restate`, cold (suspended) from `restate-suspending`; peers: their own."""
    if system == "restate" and state == "cold":
        system = OURS_COLD
    data = results["systems"].get(system)
    if data is None:
        return None
    wake: JSON | None = data.get("wake", {}).get(state, {}).get(steps)
    return wake


def best_throughput(data: JSON) -> JSON | None:
    levels = data.get("throughput") or []
    return max(levels, key=lambda level: level["per_s"]) if levels else None


def level_at(data: JSON, concurrency: int) -> JSON | None:
    return next((lv for lv in data.get("throughput") or [] if lv["concurrency"] == concurrency), None)


def idle_last(data: JSON) -> JSON | None:
    points = data.get("idle") or []
    return points[-1] if points else None


def growth_kb(point: JSON, first: JSON, roles: tuple[str, ...] = ("service", "engine")) -> float | None:
    """Memory added per extra waiting run between the first and the last size measured."""
    runs = point["waiting"] - first["waiting"]
    if runs <= 0:
        return None
    total = 0.0
    for role in roles:
        a, b = mem(first, role), mem(point, role)
        if a is not None and b is not None:
            total += b - a
    return total * 1024 / runs


# --- metrics: (name, unit, value(results, system)) ------------------------------------------


def _wake_latency(state: str, pct: str = "p50_ms") -> Callable[[JSON, str], float | None]:
    def value(results: JSON, system: str) -> float | None:
        w = wake_of(results, system, state)
        if w is None and system == "asyncio" and state == "cold":
            w = wake_of(results, system, "hot")  # nothing to restart: in memory or gone
        return w["latency"][pct] if w else None

    return value


def recovery_cpu(
    results: JSON, system: str, roles: tuple[str, ...] = ("service", "engine"), steps: str = FULL_RUN
) -> float | None:
    """The CPU the worker's restart spent recovering the waiting runs of K = `steps` before any was
    woken, per run (`bench.restart.recovery_share`); None where the cold state is not after a restart."""
    data = results["systems"].get(system)
    share = (data.get("recovery_cpu_ms_per_cold_run") or {}).get(steps) if data else None
    return sum(share.get(r, 0.0) for r in roles) if share is not None else None


def _wake_cpu(state: str, roles: tuple[str, ...] = ("service", "engine")) -> Callable[[JSON, str], float | None]:
    """CPU per wake. A cold wake after a worker restart also carries its run's share of what the
    restart spent recovering the runs (DBOS re-runs every pending workflow as its worker starts,
    so its wakes find them in memory again): like for like with a wake that replays then."""

    def value(results: JSON, system: str) -> float | None:
        w = wake_of(results, system, state)
        if w is None and system == "asyncio" and state == "cold":
            w = wake_of(results, system, "hot")
        if w is None:
            return None
        share = recovery_cpu(results, system, roles) if state == "cold" else None
        return cpu(w, roles) + (share or 0.0)

    return value


def _throughput(results: JSON, system: str) -> float | None:
    data = results["systems"].get(system)
    best = best_throughput(data) if data else None
    return best["per_s"] if best else None


def _cpu_per_replenishment(results: JSON, system: str) -> float | None:
    data = results["systems"].get(system)
    level = level_at(data, 10) if data else None
    return cpu(level) if level else None


def _overhead_per_step(metric: Callable[[JSON], float], concurrency: int) -> Callable[[JSON, str], float | None]:
    """What durability adds per turn of the loop: the system's figure less the asyncio floor's, per turn."""

    def value(results: JSON, system: str) -> float | None:
        floor = results["systems"].get("asyncio")
        data = results["systems"].get(system)
        if system == "asyncio" or not floor or not data:
            return None
        ours, base = level_at(data, concurrency), level_at(floor, concurrency)
        if not ours or not base:
            return None
        return (metric(ours) - metric(base)) / ours["turns"]

    return value


def _engine_work(key: str) -> Callable[[JSON, str], float | None]:
    """Ours only: Restate's work per replenishment at concurrency 10, from its tables (sys_invocation,
    sys_journal): what it made and what it kept."""

    def value(results: JSON, system: str) -> float | None:
        data = results["systems"].get(system)
        level = level_at(data, 10) if data else None
        found = level.get(key) if level else None
        return float(found) if found is not None else None

    return value


def _latency_c1(results: JSON, system: str) -> float | None:
    data = results["systems"].get(system)
    level = level_at(data, 1) if data else None
    return level["latency"]["p50_ms"] if level else None


def _idle_memory(results: JSON, system: str) -> float | None:
    if system == "restate":
        system = OURS_COLD
    data = results["systems"].get(system)
    points = (data or {}).get("idle") or []
    if len(points) < 2:
        return None
    return growth_kb(points[-1], points[0])


def _idle_tasks(results: JSON, system: str) -> float | None:
    if system == "restate":
        system = OURS_COLD
    if system == "temporal":
        return None  # its workflows run on their own event loops, which this count cannot see
    return tasks_growth((results["systems"].get(system) or {}).get("idle") or [])


def tasks_growth(points: list[JSON]) -> float | None:
    """asyncio tasks the service holds per extra waiting run, between the first and last size."""
    if len(points) < 2 or points[-1]["waiting"] == points[0]["waiting"]:
        return None
    return (points[-1]["tasks"] - points[0]["tasks"]) / (points[-1]["waiting"] - points[0]["waiting"])


def _idle_disk(results: JSON, system: str) -> float | None:
    if system == "restate":
        # RocksDB preallocates its log and keeps new writes in memory: a few hundred waiting runs
        # do not move the data dir's size (10,000 do), so no growth means "not measurable".
        point = idle_last(results["systems"].get(OURS_COLD) or {})
        return point["disk_kb_per_run"] if point and point["disk_kb_per_run"] else None
    data = results["systems"].get(system)
    point = idle_last(data) if data else None
    return point["disk_kb_per_run"] if point else None


def _idle_wake(results: JSON, system: str) -> float | None:
    if system == "restate":
        system = OURS_COLD
    data = results["systems"].get(system)
    point = idle_last(data) if data else None
    return point["wake_one"]["latency"]["p50_ms"] if point else None


RECOVERY_ROW = "… of which the restart's recovery, per cold run"
# Rows that are a part of the row above, not a cost to set against ours: no multiple in brackets.
NO_RATIO = {RECOVERY_ROW}


METRICS: list[tuple[str, str, Callable[[JSON, str], float | None]]] = [
    ("wake p50, K=30, suspended/cold", "ms", _wake_latency("cold")),
    ("wake p99, K=30, suspended/cold", "ms", _wake_latency("cold", "p99_ms")),
    ("wake CPU (service+engine), K=30, suspended/cold", "ms", _wake_cpu("cold")),
    (RECOVERY_ROW, "ms", recovery_cpu),
    ("wake p50, K=30, hot", "ms", _wake_latency("hot")),
    ("wake CPU (service+engine), K=30, hot", "ms", _wake_cpu("hot")),
    ("memory per waiting run (service+engine)", "KB", _idle_memory),
    ("asyncio tasks the service holds per waiting run", "", _idle_tasks),
    ("disk per waiting run", "KB", _idle_disk),
    ("wake of one among the most waiting, p50", "ms", _idle_wake),
    ("full replenishments per second (best concurrency)", "/s", _throughput),
    ("CPU per replenishment (service+engine) at concurrency 10", "ms", _cpu_per_replenishment),
    ("replenishment latency p50 at concurrency 1", "ms", _latency_c1),
    (
        "Restate invocations per replenishment, every one made (concurrency 10)",
        "",
        _engine_work("invocations_made_per_replenishment"),
    ),
    (
        "Restate invocations kept per replenishment, under its SKU's and run's keys (concurrency 10)",
        "",
        _engine_work("invocations_per_replenishment"),
    ),
    (
        "Restate journal entries kept per replenishment (concurrency 10)",
        "",
        _engine_work("journal_entries_per_replenishment"),
    ),
    ("durability's CPU per turn over the floor (concurrency 10)", "ms", _overhead_per_step(cpu, 10)),
    (
        "durability's latency per turn over the floor (concurrency 1)",
        "ms",
        _overhead_per_step(lambda lv: lv["latency"]["p50_ms"], 1),
    ),
]


def shown_metrics(results: JSON) -> list[tuple[str, str, Callable[[JSON, str], float | None]]]:
    """The rows with a figure for some system: results from before a row existed leave it out."""
    names = ["restate", *PEERS]
    return [m for m in METRICS if any(m[2](results, n) is not None for n in names if n in results["systems"])]


def fmt(value: float | None, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".strip()


def ratio(peer: float | None, ours: float | None) -> str:
    if peer is None or ours is None:
        return "n/a"
    if ours == 0:
        return "∞" if peer > 0 else "1x"
    if ours < 0 or peer < 0:
        return "n/a"  # memory that shrank over a small range: noise, not a cost to compare
    r = peer / ours
    return f"{r:.2f}x" if r < 0.95 else f"{r:.1f}x" if r < 20 else f"{r:.0f}x"


def ratio_lines(results: JSON) -> list[str]:
    lines = []
    for name, unit, value in shown_metrics(results):
        ours = value(results, "restate")
        parts = [f"ours {fmt(ours, unit)}"]
        for peer in PEERS:
            if peer not in results["systems"]:
                continue
            theirs = value(results, peer)
            in_brackets = "" if name in NO_RATIO else f" ({ratio(theirs, ours)})"
            parts.append(f"{results['systems'][peer]['label']} {fmt(theirs, unit)}{in_brackets}")
        lines.append(f"{name}: " + " | ".join(parts))
    return lines


# --- targets ---------------------------------------------------------------------------------


# Issue 33's targets: ratios in one run on 2 cores (absolute times follow the host).
CPU_VS_FLOOR = 4.0  # ours at most this many times the asyncio floor's CPU per replenishment
CPU_VS_TEMPORAL = 8.0
CPU_VS_DBOS_PG = 5.0
WAKE_VS_TEMPORAL = 12.0
THROUGHPUT_VS_FLOOR = 0.5  # ours at least this share of the floor's best throughput
ENGINE_KB_PER_WAITING_RUN = 10.0


def _times(peer: float | None, ours: float | None) -> float | None:
    if peer is None or ours is None or ours <= 0 or peer < 0:
        return None
    return peer / ours


def _share(ours: float | None, floor: float | None) -> float | None:
    if ours is None or floor is None or floor <= 0:
        return None
    return ours / floor


def engine_kb_per_waiting_run(results: JSON) -> float | None:
    """The engine's memory growth per suspended waiting run, from the fewest waiting to the most."""
    data = results["systems"].get(OURS_COLD)
    return _growth(data, ("engine",)) if data else None


def headline(results: JSON) -> JSON:
    """The figures of the closing line: ours at concurrency 10, the cold wake at K=30, the ratios.

    `vs_floor` is ours over the asyncio floor's CPU per replenishment (lower is better);
    `vs_temporal` and `vs_dbos_pg` are theirs over ours (higher is better); `vs_floor_throughput`
    is our best throughput over the floor's."""
    cpu_ours = _cpu_per_replenishment(results, "restate")
    wake_cpu = _wake_cpu("cold")
    wake_ours = wake_cpu(results, "restate")
    throughput = _throughput(results, "restate")
    floor_throughput = _throughput(results, "asyncio")
    return {
        "cpu_per_replenishment_ms": cpu_ours,
        "vs_floor": _share(cpu_ours, _cpu_per_replenishment(results, "asyncio")),
        "vs_temporal": _times(_cpu_per_replenishment(results, "temporal"), cpu_ours),
        "vs_dbos_pg": _times(_cpu_per_replenishment(results, "dbos-postgres"), cpu_ours),
        "wake_cold_cpu_ms": wake_ours,
        "wake_vs_temporal": _times(wake_cpu(results, "temporal"), wake_ours),
        "throughput_per_s": throughput,
        "vs_floor_throughput": _share(throughput, floor_throughput),
        "floor_per_s": floor_throughput,
        "engine_kb_per_waiting_run": engine_kb_per_waiting_run(results),
    }


def summary_line(results: JSON) -> str:
    """`bench: cpu_per_replenishment_ms=X vs_floor=Fx vs_temporal=Ax ...`: the last line a bench run prints."""
    h = headline(results)

    def num(value: float | None, suffix: str = "", digits: int = 1) -> str:
        return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}{suffix}"

    return (
        f"bench: cpu_per_replenishment_ms={num(h['cpu_per_replenishment_ms'])}"
        f" vs_floor={num(h['vs_floor'], 'x')}"
        f" vs_temporal={num(h['vs_temporal'], 'x')}"
        f" vs_dbos_pg={num(h['vs_dbos_pg'], 'x')}"
        f" wake_cold_cpu_ms={num(h['wake_cold_cpu_ms'])}"
        f" wake_vs_temporal={num(h['wake_vs_temporal'], 'x')}"
        f" throughput_per_s={num(h['throughput_per_s'])}"
        f" vs_floor_throughput={num(h['vs_floor_throughput'], 'x', 2)}"
        f" engine_kb_per_waiting_run={num(h['engine_kb_per_waiting_run'])}"
    )


def targets(results: JSON) -> list[JSON]:
    h = headline(results)
    out = []
    if h["vs_floor"] is not None:
        out.append(
            {
                "target": "CPU per replenishment (service+engine, concurrency 10) "
                f"≤ {CPU_VS_FLOOR:g}x the asyncio floor's",
                "value": f"{h['vs_floor']:.1f}x ({fmt(h['cpu_per_replenishment_ms'], 'ms')} for ours)",
                "met": h["vs_floor"] <= CPU_VS_FLOOR,
            }
        )
    for key, factor, peer in (
        ("vs_temporal", CPU_VS_TEMPORAL, "Temporal"),
        ("vs_dbos_pg", CPU_VS_DBOS_PG, "DBOS on PostgreSQL"),
    ):
        if h[key] is not None:
            out.append(
                {
                    "target": f"… ≥ {factor:g}x less than {peer}",
                    "value": f"{h[key]:.1f}x",
                    "met": h[key] >= factor,
                }
            )
    if h["wake_vs_temporal"] is not None:
        out.append(
            {
                "target": f"cold wake CPU at K=30 ≥ {WAKE_VS_TEMPORAL:g}x less than Temporal's (service+engine)",
                "value": f"{h['wake_vs_temporal']:.1f}x ({fmt(h['wake_cold_cpu_ms'], 'ms')} for ours)",
                "met": h["wake_vs_temporal"] >= WAKE_VS_TEMPORAL,
            }
        )
    suspended = results["systems"].get(OURS_COLD, {}).get("idle") or []
    if len(suspended) >= 2:
        growth = growth_kb(suspended[-1], suspended[0], ("service",))
        tasks = tasks_growth(suspended)
        most = suspended[-1]["waiting"]
        out.append(
            {
                "target": f"service memory flat with waiting runs (≤ {FLAT_KB:g} KB per run, measured up to {most})",
                "value": f"{fmt(growth)} KB and {fmt(tasks)} tasks per extra waiting run",
                # A few hundred runs move RSS less than the allocator's own noise: judged from 1,000 up.
                "met": None if most < JUDGE_FLAT_FROM else (growth is not None and growth <= FLAT_KB),
            }
        )
    ours = results["systems"].get("restate")
    best = best_throughput(ours) if ours else None
    if best and h["vs_floor_throughput"] is not None:
        out.append(
            {
                "target": f"best throughput ≥ {THROUGHPUT_VS_FLOOR:g}x the asyncio floor's",
                "value": f"{h['vs_floor_throughput']:.2f}x ({best['per_s']}/s at concurrency {best['concurrency']}, "
                f"the floor {fmt(h['floor_per_s'])}/s)",
                "met": h["vs_floor_throughput"] >= THROUGHPUT_VS_FLOOR,
            }
        )
    if h["engine_kb_per_waiting_run"] is not None:
        most = suspended[-1]["waiting"] if suspended else 0
        out.append(
            {
                "target": f"engine memory ≤ {ENGINE_KB_PER_WAITING_RUN:g} KB per suspended waiting run",
                "value": f"{fmt(h['engine_kb_per_waiting_run'])} KB (growth up to {most:,} waiting runs)",
                "met": h["engine_kb_per_waiting_run"] <= ENGINE_KB_PER_WAITING_RUN,
            }
        )
    return out


# --- plots -----------------------------------------------------------------------------------


def cold_label(label: str, state: str) -> str:
    return label if not state or state.split(" (")[0] in label else f"{label}: {state}"


def plots(results: JSON, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems: JSON = results["systems"]
    written = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    def label(name: str) -> str:
        return str(systems[name]["label"])

    # Wake-up: latency and CPU against the journal's length, hot and cold.
    def wake_cpu(w: JSON, name: str, state: str, k: str) -> float:
        """As the table's row: a cold wake after a restart with its run's share of the recovery."""
        share = recovery_cpu(results, name, steps=k) if state == "cold" else None
        return cpu(w) + (share or 0.0)

    wake_metrics: tuple[tuple[Callable[[JSON, str, str, str], float], str, str], ...] = (
        (lambda w, name, state, k: w["latency"]["p50_ms"], "time to next step, p50 (ms)", "wake_latency.png"),
        (wake_cpu, "CPU per wake, service + engine (ms)", "wake_cpu.png"),
    )
    for metric, ylabel, fname in wake_metrics:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
        for ax, state, title in ((axes[0], "hot", "hot (still in memory)"), (axes[1], "cold", "suspended / cold")):
            for name, data in systems.items():
                series = data.get("wake", {}).get(state) or {}
                if not series:
                    continue
                ks = sorted(series, key=int)
                ax.plot(
                    [int(k) for k in ks],
                    [metric(series[k], name, state, k) for k in ks],
                    "o-",
                    color=COLORS.get(name),
                    label=label(name) if state == "hot" else cold_label(label(name), data.get("cold_state", "")),
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("journaled steps before the wait (K)")
            ax.set_title(f"wake-up, {title}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        axes[0].set_ylabel(ylabel)
        save(fig, fname)

    def curves(series_of: Callable[[dict[str, Any]], list[dict[str, Any]]], x: str, xlabel: str, plots: Any) -> None:
        """One chart per metric: every system's points of `series_of(data)`, `x` against the metric."""
        for metric, ylabel, fname, logy in plots:
            fig, ax = plt.subplots(figsize=(8, 4.5))
            for name, data in systems.items():
                points = series_of(data)
                if points:
                    ax.plot(
                        [p[x] for p in points],
                        [metric(p) for p in points],
                        "o-",
                        color=COLORS.get(name),
                        label=label(name),
                    )
            ax.set_xscale("log")
            if logy:
                ax.set_yscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
            save(fig, fname)

    # Idle cost: memory and wake-of-one against the number waiting.
    curves(
        lambda data: data.get("idle") or [],
        "waiting",
        "replenishments waiting for approval",
        (
            (
                lambda p: (mem(p, "service") or 0) + (mem(p, "engine") or 0),
                "memory, service + engine (MB, PSS)",
                "idle_memory.png",
                False,
            ),
            (lambda p: p["wake_one"]["latency"]["p50_ms"], "wake of one, p50 (ms)", "idle_wake.png", True),
            (lambda p: p["tasks_per_run"], "asyncio tasks held per waiting run", "idle_tasks.png", False),
        ),
    )
    # Throughput: rate, latency and CPU per replenishment against concurrency.
    curves(
        lambda data: data.get("throughput") or [],
        "concurrency",
        "concurrent replenishments (load generator)",
        (
            (lambda lv: lv["per_s"], "full replenishments per second", "throughput.png", False),
            (lambda lv: lv["latency"]["p50_ms"], "replenishment latency p50 (ms)", "throughput_latency.png", True),
            (lambda lv: cpu(lv), "CPU per replenishment, service + engine (ms)", "cpu_per_replenishment.png", True),
        ),
    )
    return written


# --- the table on the docs' benchmarks page -------------------------------------------------


def table(results: JSON) -> str:
    meta = results["meta"]
    hw = meta["hardware"]
    names = ["restate", *[p for p in PEERS if p in results["systems"]]]
    labels = [results["systems"][n]["label"] if n in results["systems"] else n for n in names]
    lines = [
        f"Figures from **one run** of `{meta.get('command', 'python -m bench')}` "
        f"({meta['plan']['name']} plan, {meta['started_at']}) on {hw['cpu']}, {hw['cores']} cores, "
        f"{hw['memory_gb']} GB, {hw['os']}, Python {hw['python']}; a shared machine, so absolute figures are "
        "noise and the ratios, measured side by side in the same run, are the result. "
        "In brackets: the peer's figure as a multiple of ours." + server_and_memory(meta),
        "",
        "| metric | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(names),
    ]
    for name, unit, value in shown_metrics(results):
        ours = value(results, "restate")
        cells = [fmt(ours, unit)]
        for peer in names[1:]:
            theirs = value(results, peer)
            cells.append(fmt(theirs, unit) if name in NO_RATIO else f"{fmt(theirs, unit)} ({ratio(theirs, ours)})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += idle_sizes_lines(results)
    lines += timeout_table(results)
    lines += model_calls_lines(results)
    lines += profile_table(results)
    lines += ["", "| target (ours) | measured | met |", "|---|---|---|"]
    for t in targets(results):
        lines.append(f"| {t['target']} | {t['value']} | {verdict(t['met'])} |")
    retried = [
        f"{results['systems'][n]['label']}: {r['measurement']} ({r['error'].split(':')[0]})"
        for n in results["systems"]
        for r in results["systems"][n].get("retries") or []
    ]
    if retried:
        lines += ["", "Measured a second time after a transient error: " + "; ".join(retried) + "."]
    loads = [
        f"{data['label']} {data['load_average'][0]:.1f} to {data['load_average'][-1]:.1f}"
        for data in results["systems"].values()
        if data.get("load_average")
    ]
    if loads:
        lines += ["", "Load average (1 min) at the start and end of each system's turn: " + "; ".join(loads) + "."]
    if results.get("failed"):
        lines += ["", "Could not be measured in this run: " + ", ".join(results["failed"])]
    # Made from the results, so a run from before the line gained a figure shows it too.
    lines += ["", f"The closing line these results make (`make bench` prints it last): `{summary_line(results)}`"]
    return "\n".join(lines) + "\n"


def spoken_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def idle_sizes_lines(results: JSON) -> list[str]:
    """How many runs waited when each system's idle cost was read: the sizes can differ (see the plan)."""
    sizes = [
        data["label"] + " " + spoken_list([f"{point['waiting']:,}" for point in data["idle"]])
        for data in results["systems"].values()
        if data.get("idle")
    ]
    if not sizes:
        return []
    return [
        "",
        "Waiting runs when the idle cost was read: " + "; ".join(sizes) + ". Memory per waiting run is the "
        "growth from the first size to the last, divided by the runs added; the wake of one among the most "
        "waiting is at the last size.",
    ]


def server_and_memory(meta: JSON) -> str:
    """Our service's server and the engine's memory settings, where the run recorded them."""
    parts = []
    if meta.get("service_server"):
        parts.append(f"Our service ran on {meta['service_server']}")
    memory = meta.get("restate_memory")
    if memory:
        parts.append("Restate's memory: " + ", ".join(f"{k} {v}" for k, v in memory.items()))
    return (" " + "; ".join(parts) + ".") if parts else ""


def timeout_table(results: JSON) -> list[str]:
    """Restate's inactivity timeout: the default minute (runs held open) against 1 s (suspended)."""
    hot, cold = results["systems"].get(OURS_HOT), results["systems"].get(OURS_COLD)
    if not hot or not cold or not hot.get("idle") or not cold.get("idle"):
        return []
    rows = []
    for name, unit, get in (
        ("asyncio tasks held per waiting run", "", lambda d: tasks_growth(d["idle"])),
        ("service memory per waiting run", "KB", lambda d: _growth(d, ("service",))),
        ("engine memory per waiting run", "KB", lambda d: _growth(d, ("engine",))),
        ("wake of one among the most waiting, p50", "ms", lambda d: d["idle"][-1]["wake_one"]["latency"]["p50_ms"]),
        (
            "CPU from its approval to its next step's first call (service+engine)",
            "ms",
            lambda d: cpu(d["idle"][-1]["wake_one"]),
        ),
    ):
        rows.append(f"| {name} | {fmt(get(hot), unit)} | {fmt(get(cold), unit)} |")
    return [
        "",
        "Restate's inactivity timeout (ours; real replenishments waiting for approval):",
        "",
        "| | default (1 min): runs held open | 1 s: runs suspended |",
        "|---|---|---|",
        *rows,
    ]


def model_calls_lines(results: JSON) -> list[str]:
    """Ours only, with the Claude decider over the stand-in API: counted by the stand-in and by the ledgers."""
    figures = results.get("model_calls")
    if not figures:
        return []
    from bench.model_calls import lines

    return ["", "Ours, " + "; ".join(lines(figures)) + "."]


def _growth(data: JSON, roles: tuple[str, ...]) -> float | None:
    points = data.get("idle") or []
    return growth_kb(points[-1], points[0], roles) if len(points) >= 2 else None


def profile_table(results: JSON) -> list[str]:
    profile = results.get("profile")
    if not profile or not profile.get("share"):
        return []
    cost = profile.get("cpu_ms_per_replenishment", {})
    wake = profile.get("wake") or {}
    per_wake = wake.get("cpu_ms_per_wake", {})
    lines = [
        "",
        f"Where our service's CPU goes (py-spy): replenishing at concurrency 50 ({profile['samples']} samples; "
        f"per replenishment service {fmt(cost.get('service'), 'ms')}, engine {fmt(cost.get('engine'), 'ms')}, "
        f"world {fmt(cost.get('world'), 'ms')})"
        + (
            f", and waking suspended runs with 30 steps one by one ({wake['samples']} samples; per wake service "
            f"{fmt(per_wake.get('service'), 'ms')}, engine {fmt(per_wake.get('engine'), 'ms')})"
            if wake.get("share")
            else ""
        )
        + ":",
        "",
        "| layer | replenishing | waking |",
        "|---|---|---|",
    ]
    lines += layer_rows(profile["share"], wake.get("share"))
    for label, part in (("replenishing", profile), ("waking", wake)):
        hottest = part.get("top_self") or []
        if hottest:
            frames = "; ".join(f"`{h['frame']}` {h['share'] * 100:.0f}%" for h in hottest[:5])
            lines += ["", f"Hottest frames of the service's own CPU, {label}: {frames}."]
    return lines + service_native_table(profile, wake) + engine_profile_table(profile, wake)


def layer_rows(replenishing: dict[str, float], waking: dict[str, float] | None) -> list[str]:
    """A profile table's rows: each layer's share replenishing and waking (n/a: no wake profile)."""
    rows = []
    for group, share in replenishing.items():
        woke = f"{waking.get(group, 0) * 100:.0f}%" if waking else "n/a"
        rows.append(f"| {group} | {share * 100:.0f}% | {woke} |")
    return rows


def engine_profile_table(profile: JSON, wake: JSON) -> list[str]:
    """restate-server's CPU by layer, from `perf` in the same pass; or why it was not sampled."""
    return perf_table(
        profile.get("engine") or {},
        wake.get("engine") or {},
        not_sampled="The engine (restate-server) was not sampled in this run",
        title="Where the engine's CPU goes (`perf record` on restate-server, the same pass",
        hottest=("the engine's CPU, replenishing", "replenishing"),
    )


def service_native_table(profile: JSON, wake: JSON) -> list[str]:
    """The service's CPU by library and kernel work, from `perf` in the same pass (py-spy sees
    only its Python frames); or why it was not sampled."""
    return perf_table(
        profile.get("native") or {},
        wake.get("native") or {},
        not_sampled="The service was not sampled by perf in this run",
        title="Where the service's CPU goes natively (`perf record` on its Python process, the same pass",
        hottest=("the service's CPU, waking", "waking"),
    )


def perf_table(part: JSON, part_wake: JSON, not_sampled: str, title: str, hottest: tuple[str, str]) -> list[str]:
    if not part.get("share"):
        why = part.get("unavailable")
        return ["", f"{not_sampled}: {why}."] if why else []
    lines = [
        "",
        f"{title}; {part.get('samples')} samples replenishing"
        + (f", {part_wake.get('samples')} waking" if part_wake.get("share") else "")
        + "):",
        "",
        "| layer | replenishing | waking |",
        "|---|---|---|",
    ]
    lines += layer_rows(part["share"], part_wake.get("share"))
    label, which = hottest
    symbols = ((part if which == "replenishing" else part_wake).get("top_self")) or []
    if symbols:
        named = "; ".join(f"`{h['symbol']}` {h['share'] * 100:.0f}%" for h in symbols[:6])
        lines += ["", f"Hottest symbols of {label}: {named}."]
    return lines


def verdict(met: bool | None) -> str:
    if met is None:
        return "not judged (too few runs: `make bench`)"
    return "yes" if met else "**no**"


def write_page(text: str) -> bool:
    """The table between the benchmarks page's markers replaced by `text`; False if the page or a marker is missing."""
    try:
        page = PAGE.read_text()
    except OSError:
        return False
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(page):
        return False
    PAGE.write_text(pattern.sub(lambda _: f"{START}\n{text}{END}", page))
    return True


def report(results: JSON, out: Path, say: Say, page: bool = True) -> None:
    for path in plots(results, out):
        say(f"plot: {path}")
    text = table(results)
    (out / "table.md").write_text(text)
    if page and write_page(text):
        say(f"table written into {PAGE}")
    results["targets"] = targets(results)
    say("targets (ours):")
    for t in results["targets"]:
        say(f"  {verdict(t['met'])}: {t['target']}: {t['value']}")
    for line in model_calls_lines(results)[1:]:
        say(line)
    say("ours against each peer (peer's figure as a multiple of ours):")
    for line in ratio_lines(results):
        print(line, flush=True)


def page_table() -> str | None:
    """The table between the benchmarks page's markers, or None if they are missing."""
    match = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), PAGE.read_text(), re.S)
    return match.group(1) if match else None


def main() -> int:
    """`python -m bench.report`: plots, table and ratios again from bench/results/results.json.

    `--table` rewrites only the table on docs/benchmarks.md; `--check` only says whether it matches the json.
    """
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m bench.report", description=main.__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the docs' table differs from the json")
    parser.add_argument("--table", action="store_true", help="rewrite the table on docs/benchmarks.md, no plots")
    options = parser.parse_args()
    out = Path(__file__).resolve().parent / "results"
    results = json.loads((out / "results.json").read_text())
    if options.check:
        same = page_table() == table(results)
        print(
            f"the table on {PAGE.name} matches bench/results/results.json"
            if same
            else f"the table on {PAGE.name} is stale: run `python -m bench.report --table`"
        )
        return 0 if same else 1
    if options.table:
        write_page(table(results))
        return 0
    report(results, out, print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
