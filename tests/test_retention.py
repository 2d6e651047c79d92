"""Retention is set on purpose, the same in every place it is set: the service's own options (what
it tells Restate at discovery, which wins), the single-node stack's restate.toml and the cluster's
node files (what restate-server takes as its defaults). Restate's own default is one day."""

from __future__ import annotations

import json
import subprocess
import tomllib
from datetime import timedelta
from pathlib import Path

import pytest
from restate.discovery import compute_discovery_json
from restate.endpoint import Endpoint

from replenisher.durable import retention
from replenisher.durable.app import SERVICES
from replenisher.stack.install import ensure_restate
from support import REPO_ROOT

CONFIGS = [REPO_ROOT / "restate.toml", *sorted((REPO_ROOT / "deploy" / "cluster").glob("node*.toml"))]
KEYS = {
    "default-journal-retention": retention.JOURNAL,
    "default-workflow-completion-retention": retention.WORKFLOW,
    "default-idempotency-retention": retention.IDEMPOTENCY,
}


def days(d: timedelta) -> str:
    assert d == timedelta(days=d.days), "whole days, as the files write them"
    return f"{d.days}d"


def test_the_windows_are_longer_than_restates_day_and_a_journal_outlives_no_idempotency_key() -> None:
    assert min(retention.JOURNAL, retention.WORKFLOW, retention.IDEMPOTENCY) > timedelta(days=1)
    # A call with an idempotency key keeps its journal no longer than the key (Restate caps it).
    assert retention.IDEMPOTENCY >= retention.JOURNAL
    assert retention.WORKFLOW >= retention.JOURNAL


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_restate_config_sets_the_same_windows(config: Path) -> None:
    settings = tomllib.loads(config.read_text())
    assert {key: settings.get(key) for key in KEYS} == {key: days(value) for key, value in KEYS.items()}


def test_restate_server_reads_them_from_the_stacks_config() -> None:
    server = ensure_restate().server
    dumped = subprocess.run(
        [str(server), "--config-file", str(REPO_ROOT / "restate.toml"), "--dump-config"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    loaded = tomllib.loads(dumped)
    assert {key: loaded[key] for key in KEYS} == {key: days(value) for key, value in KEYS.items()}


def test_the_service_tells_restate_its_windows_at_discovery() -> None:
    endpoint = Endpoint()
    for service in SERVICES:
        endpoint.bind(service)
    manifest = json.loads(compute_discovery_json(endpoint, 3, "bidi"))
    windows = {"JOURNAL": retention.JOURNAL, "WORKFLOW": retention.WORKFLOW, "IDEMPOTENCY": retention.IDEMPOTENCY}
    ms = {name: int(value.total_seconds() * 1000) for name, value in windows.items()}
    services = {s["name"]: s for s in manifest["services"]}
    # ServiceAnswered too: its notes end the outage bands whose refusals the journal keeps, as long.
    assert set(services) == {"SkuAgent", "Replenish", "RunArchive", "AuditLog", "ServiceAnswered", "SkuList"}
    for service in services.values():
        assert service["journalRetention"] == ms["JOURNAL"], service["name"]
        assert service["idempotencyRetention"] == ms["IDEMPOTENCY"], service["name"]
        for handler in service["handlers"]:
            kept = (handler.get("journalRetention"), handler.get("idempotencyRetention"))
            # The SKU list's calls keep nothing (durable/sku_list.py): each finished one kept would add to
            # every scan of `sys_invocation`, and none says anything a timeline shows. Every other keeps the
            # service's windows.
            assert kept == ((0, 0) if service["name"] == "SkuList" else (None, None)), (service["name"], handler)
    [run] = [h for h in services["Replenish"]["handlers"] if h["name"] == "run"]
    assert run["workflowCompletionRetention"] == ms["WORKFLOW"]
