"""Where an upgrade check's copy of Restate's data comes from, and what it records about itself.

A source is a Restate base dir (the one holding `<node-name>/`, as `.stack/restate-data` does), or
a corpus archive (`.tar.gz`) holding one under `restate-data/`. Either may carry a manifest,
`upgrade-corpus.json`, beside the data: the Restate version that wrote it and the settings the
service ran with. A run journals what its code computed from those settings, so the candidate
must replay with the same ones; without a manifest they come from this shell's `REPLENISHER_*`
variables, as `make restart-service` takes them. The source itself is only ever read.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from replenisher.stack.install import RESTATE_VERSION
from replenisher.stack.local import StackConfig

MANIFEST = "upgrade-corpus.json"
DATA = "restate-data"
NODE_NAME = "replenisher"
SETTINGS_PREFIX = "REPLENISHER_"


class SourceError(RuntimeError):
    """The source is missing or not Restate data (exit 2: the operator named the wrong thing)."""


class VersionError(RuntimeError):
    """The data was written by another Restate version than the one this checkout pins (exit 3)."""


class CorpusManifest(BaseModel):
    restate_version: str = Field(description="the restate-server that wrote the data")
    service_env: dict[str, str] = Field(default_factory=dict, description="REPLENISHER_* the service ran with")
    deployments: list[str] = Field(default_factory=list, description="where the data's deployments point")
    about: str = ""


class Copy(BaseModel):
    """A private copy, ready for a restate-server: `base_dir` holds `<node_name>/`."""

    base_dir: Path
    manifest: CorpusManifest


def environment_settings(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(SETTINGS_PREFIX)}


def _manifest(path: Path, env: Mapping[str, str]) -> CorpusManifest:
    if not path.is_file():
        return CorpusManifest(restate_version=RESTATE_VERSION, service_env=environment_settings(env))
    try:
        return CorpusManifest.model_validate_json(path.read_text())
    except ValidationError as e:
        raise SourceError(f"{path} is not an upgrade-check manifest: {e.errors()[0]['msg']}") from e


def _check_version(manifest: CorpusManifest, source: Path) -> None:
    if manifest.restate_version != RESTATE_VERSION:
        raise VersionError(
            f"{source} was written by Restate {manifest.restate_version}; this checkout pins {RESTATE_VERSION}. "
            f"Check it with a checkout that pins {manifest.restate_version}, or regenerate the corpus "
            "(tests/fixtures/upgrade/README.md)"
        )


def _is_base_dir(path: Path) -> bool:
    return (path / NODE_NAME).is_dir()


def copy_source(source: Path, work: Path, env: Mapping[str, str] | None = None) -> Copy:
    """Copy `source` (a base dir, a dir holding `restate-data/`, or a `.tar.gz` of one) into `work`."""
    env = os.environ if env is None else env
    target = work / DATA
    if source.is_file() and source.name.endswith((".tar.gz", ".tgz")):
        unpacked = work / "unpacked"
        try:
            with tarfile.open(source, "r:gz") as archive:
                archive.extractall(unpacked, filter="data")
        except (tarfile.TarError, OSError) as e:
            raise SourceError(f"{source} is not a readable corpus archive: {e}") from e
        return copy_source(unpacked, work, env)
    if not source.is_dir():
        raise SourceError(f"no such data dir: {source} (give a Restate data dir, a corpus .tar.gz, or --from-stack)")
    base = source / DATA if _is_base_dir(source / DATA) else source
    if not _is_base_dir(base):
        raise SourceError(
            f"{source} holds no Restate data (no {NODE_NAME}/ node dir in it or in {source / DATA}); "
            "give the base dir restate-server ran with, e.g. .stack/restate-data"
        )
    manifest = _manifest(source / MANIFEST if (source / MANIFEST).is_file() else base / MANIFEST, env)
    _check_version(manifest, source)
    if base.resolve() != target.resolve():
        shutil.copytree(base, target, symlinks=True, ignore=shutil.ignore_patterns(MANIFEST, "*.sock"))
    return Copy(base_dir=target, manifest=manifest)


def stack_source(state_dir: Path) -> Path:
    """The local stack's data dir, for `--from-stack`: only read, and only while the stack is stopped
    (restate-server's files change under a running one; the caller checks it is down)."""
    return StackConfig(state_dir=state_dir).data_dir
