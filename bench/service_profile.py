"""Where our service's CPU goes natively: Linux `perf` samples of its Python process, by library.

py-spy (`bench.profile`) sees only Python frames: time spent in granian's Rust side, in the
Restate SDK's Rust VM or in the kernel shows there as the Python frame that called into it
(granian's `_spawn_asgi_worker` above all). `perf record` on the same process, in the same
pass, puts every sample in the shared object it ran in, and kernel samples in what the kernel
was doing, so the service's CPU adds up across Python, Rust and the kernel.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from bench.engine_profile import KERNEL_GROUPS, KERNEL_OTHER

# (layer, markers): a user-space sample belongs to the first layer one of whose markers its
# shared object's name contains.
LIBRARY_GROUPS = [
    ("granian's Rust side (HTTP/2, handing each message to Python and back)", ("_granian",)),
    ("the Restate SDK's Rust VM (protocol, journal)", ("_internal.cpython",)),
    ("pydantic-core", ("_pydantic_core",)),
    ("uvloop (the event loop)", ("loop.cpython",)),
    ("CPython: the interpreter running Python code (ours, the SDK's, asyncio's)", ("libpython", "python3")),
    ("C library (allocation, copies, the user side of system calls)", ("libc.so", "ld-linux", "libm.so")),
]
LIBRARY_OTHER = "the rest (other extension modules)"
LAYERS = [g for g, _ in KERNEL_GROUPS] + [KERNEL_OTHER] + [g for g, _ in LIBRARY_GROUPS] + [LIBRARY_OTHER]

_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)%\s+(\S+)\s+\[(.)\]\s+(.+?)\s*$")


def layer_of(kind: str, library: str, symbol: str) -> str:
    if kind == "k":
        return next((g for g, markers in KERNEL_GROUPS if any(m in symbol for m in markers)), KERNEL_OTHER)
    return next((g for g, markers in LIBRARY_GROUPS if any(m in library for m in markers)), LIBRARY_OTHER)


def summarise_report(report: str, top: int = 10) -> dict[str, Any]:
    """`perf report --fields overhead,dso,sym` text, as shares per layer and the hottest symbols."""
    shares: Counter[str] = Counter()
    symbols: list[tuple[float, str]] = []
    for line in report.splitlines():
        if line.startswith("#") or not (m := _LINE.match(line)):
            continue
        share, library, kind, symbol = float(m.group(1)) / 100, m.group(2), m.group(3), m.group(4)
        shares[layer_of(kind, library, symbol)] += share
        symbols.append((share, f"[{kind}] {symbol} ({library})"))
    total = sum(shares.values())
    if not total:
        return {}
    symbols.sort(reverse=True)
    return {
        "share": {g: round(shares[g] / total, 3) for g in LAYERS},
        "top_self": [{"symbol": s[:140], "share": round(x / total, 3)} for x, s in symbols[:top]],
    }
