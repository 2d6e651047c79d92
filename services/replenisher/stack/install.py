"""Find or install the pinned Restate server and CLI binaries.

Restate publishes static binaries as npm packages, one per OS/arch. We install the
platform package directly (not the `@restatedev/restate-server` wrapper): the wrapper
only adds a node launcher and an analytics post-install script, and we start the
binary itself so that the PID we hold is the server.

The packages are ~430 MB, so they live in a per-user cache, never in the repository.
"""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

RESTATE_VERSION = "1.7.12"
RESTATE_DIR_ENV = "REPLENISHER_RESTATE_DIR"

# npm's naming of the platforms it ships binaries for.
_OS_NAMES = {"linux": "linux", "darwin": "darwin"}
_ARCH_NAMES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


class RestateInstallError(RuntimeError):
    """The Restate binaries could not be found or installed."""


class RestateBinaries(BaseModel):
    model_config = ConfigDict(frozen=True)

    server: Path
    cli: Path
    version: str = RESTATE_VERSION


def platform_suffix() -> str:
    """The npm platform suffix for this machine, e.g. `linux-x64`."""
    os_name = _OS_NAMES.get(sys.platform)
    arch = _ARCH_NAMES.get(platform.machine().lower())
    if os_name is None or arch is None:
        raise RestateInstallError(
            f"Restate {RESTATE_VERSION} ships binaries for linux/darwin on x64/arm64 only; "
            f"this machine is {sys.platform}/{platform.machine()}"
        )
    return f"{os_name}-{arch}"


def default_install_dir() -> Path:
    override = os.environ.get(RESTATE_DIR_ENV)
    if override:
        return Path(override).expanduser().resolve()
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home).expanduser().resolve() / "stock-replenisher" / f"restate-{RESTATE_VERSION}"


def _packages(suffix: str) -> tuple[str, str]:
    return f"@restatedev/restate-server-{suffix}", f"@restatedev/restate-{suffix}"


def binaries_in(install_dir: Path) -> RestateBinaries:
    """Where the binaries are (or would be) inside an install dir."""
    server_pkg, cli_pkg = _packages(platform_suffix())
    modules = install_dir / "node_modules"
    return RestateBinaries(
        server=modules / server_pkg / "bin" / "restate-server",
        cli=modules / cli_pkg / "bin" / "restate",
    )


def _reports_version(binary: Path) -> bool:
    """A half-extracted or foreign binary must not pass for the pinned one."""
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        return False
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and RESTATE_VERSION in out.stdout


def _is_installed(bins: RestateBinaries) -> bool:
    return _reports_version(bins.server) and _reports_version(bins.cli)


def _npm_install(install_dir: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise RestateInstallError(
            "npm was not found on PATH. Install Node.js (which provides npm) so the pinned "
            f"Restate {RESTATE_VERSION} binaries can be downloaded, or set {RESTATE_DIR_ENV} "
            "to a directory where they are already installed."
        )
    server_pkg, cli_pkg = _packages(platform_suffix())
    cmd = [
        npm,
        "install",
        "--prefix",
        str(install_dir),
        "--no-audit",
        "--no-fund",
        "--save-exact",
        "--ignore-scripts",
        "--loglevel=error",
        f"{server_pkg}@{RESTATE_VERSION}",
        f"{cli_pkg}@{RESTATE_VERSION}",
    ]
    print(f"Installing Restate {RESTATE_VERSION} into {install_dir} (one-off, ~430 MB)...", file=sys.stderr)
    result = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        raise RestateInstallError(
            f"`{' '.join(cmd)}` failed with exit code {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )


def ensure_restate(install_dir: Path | None = None) -> RestateBinaries:
    """Return the pinned Restate binaries, installing them with npm on first use."""
    target = install_dir or default_install_dir()
    bins = binaries_in(target)
    if _is_installed(bins):
        return bins
    target.mkdir(parents=True, exist_ok=True)
    # Two processes (e.g. `make` and a test session) may race for the first install.
    with (target / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _is_installed(bins):
            _npm_install(target)
        if not _is_installed(bins):
            raise RestateInstallError(
                f"npm finished but {bins.server} / {bins.cli} do not report version {RESTATE_VERSION}"
            )
    return bins


def main() -> int:
    try:
        bins = ensure_restate()
    except RestateInstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"restate-server: {bins.server}")
    print(f"restate:        {bins.cli}")
    for link in link_into_venv(bins):
        print(f"linked:         {link}")
    return 0


def link_into_venv(bins: RestateBinaries) -> list[Path]:
    """Put `restate` and `restate-server` beside the venv's python, so `.venv/bin/restate` works."""
    if sys.prefix == sys.base_prefix:
        return []
    links = []
    for binary in (bins.cli, bins.server):
        link = Path(sys.prefix) / "bin" / binary.name
        if not (link.is_symlink() and link.resolve() == binary.resolve()):
            link.unlink(missing_ok=True)
            link.symlink_to(binary)
        links.append(link)
    return links


if __name__ == "__main__":
    raise SystemExit(main())
