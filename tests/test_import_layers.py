"""The package's architecture, as pyproject.toml's import-linter contracts state it, holds.

Layers (cli, then the faces, the operator layer, the timeline, the loop's engines, the loop, the
domain), the composition root between the Restate handlers and the parts it builds, adapters and
deciders that know nothing of the loop, a domain that imports nothing outside itself, a service
that never imports the simulated world (only the in-memory engine runs on it), sign-in that knows
nothing of the faces using it, and no import cycle anywhere (a function-local import that hides one
counts). A broken contract fails this test with its name and the imports that break it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
CONTRACTS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def verdict(report: str, name: str) -> str | None:
    """KEPT or BROKEN as the report gives it for the contract (it wraps long names over lines)."""
    flat, wanted = re.sub(r"\s+", " ", report), re.sub(r"\s+", " ", name)
    found = re.search(re.escape(wanted) + r" (KEPT|BROKEN)", flat)
    return found.group(1) if found else None


def test_the_contracts_state_the_layers_the_domain_and_no_cycles() -> None:
    assert {c["id"] for c in CONTRACTS} == {
        "layers",
        "composition",
        "pluggable",
        "domain",
        "acyclic",
        "service-without-world",
        "identity",
    }
    layers = next(c for c in CONTRACTS if c["id"] == "layers")["layers"]
    assert layers[0] == "replenisher.cli" and layers[-2:] == ["replenisher.loop", "replenisher.domain"]
    # The world's adapter lives in the in-memory engine, a sibling of the Restate one that neither imports.
    assert "replenisher.durable | replenisher.in_memory | replenisher.replay" in layers
    no_world = next(c for c in CONTRACTS if c["id"] == "service-without-world")
    assert no_world["forbidden_modules"] == ["simulated_world"] and not no_world.get("ignore_imports")
    served = {"replenisher.durable", "replenisher.inbound", "replenisher.wiring", "replenisher.adapters"}
    assert served <= set(no_world["source_modules"]) and "replenisher.in_memory" not in no_world["source_modules"]
    # The faces share their use cases through the operator layer, which reads Restate for them.
    faces = next(i for i, layer in enumerate(layers) if "replenisher.console" in layer)
    assert layers[faces + 1 : faces + 3] == ["replenisher.operations", "replenisher.timeline"]


def test_every_import_contract_is_kept() -> None:
    assert LINT_IMPORTS.exists(), f"{LINT_IMPORTS} is missing: `make setup` installs import-linter (a dev dependency)"
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    report = done.stdout + done.stderr
    verdicts = {c["name"]: verdict(report, c["name"]) for c in CONTRACTS}
    broken = [name for name, v in verdicts.items() if v != "KEPT"]
    assert done.returncode == 0 and not broken, f"import contracts not kept: {broken}\n{report}"
