"""Where our service's CPU goes natively: Linux `perf` samples of its Python process, by library.

py-spy (`bench.profile`) sees only Python frames: time spent in granian's Rust side, in the
Restate SDK's Rust VM or in the kernel shows there as the Python frame that called into it
(granian's `_spawn_asgi_worker` above all). `perf record` on the same process, in the same
pass, puts every sample in the shared object it ran in, and kernel samples in what the kernel
was doing, so the service's CPU adds up across Python, Rust and the kernel.
"""

from __future__ import annotations

import re
from typing import Any

from bench.engine_profile import KERNEL_GROUPS, KERNEL_OTHER, Sample, summarise_samples

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


def _service_sample(line: str) -> Sample | None:
    if not (m := _LINE.match(line)):
        return None
    library, kind, symbol = m.group(2), m.group(3), m.group(4)
    return float(m.group(1)) / 100, layer_of(kind, library, symbol), f"[{kind}] {symbol} ({library})"[:140]


def summarise_report(report: str, top: int = 10) -> dict[str, Any]:
    """`perf report --fields overhead,dso,sym` text, as shares per layer and the hottest symbols."""
    return summarise_samples(report, _service_sample, LAYERS, top)
