"""The OpenID provider the sign-in tests run: oidc-provider from the npm registry, as a process.

Installed once (pinned) into the per-user cache beside Restate's binaries, like them by npm.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

from replenisher.stack.install import default_install_dir
from replenisher.stack.processes import ManagedProcess, http_answers

OIDC_PROVIDER_VERSION = "9.13.3"
CLIENT_ID = "replenisher-console"
CLIENT_SECRET = "a-client-secret-for-the-tests-only-0123456789"
SCRIPT = Path(__file__).with_name("oidc_provider.mjs")


def install_dir() -> Path:
    return default_install_dir().parent / f"oidc-provider-{OIDC_PROVIDER_VERSION}"


def ensure_oidc_provider() -> Path:
    """The folder holding node_modules/oidc-provider and the provider script, installing on first use."""
    target = install_dir()
    target.mkdir(parents=True, exist_ok=True)
    package = target / "node_modules" / "oidc-provider" / "package.json"
    with (target / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not package.is_file() or f'"version": "{OIDC_PROVIDER_VERSION}"' not in package.read_text():
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError("npm is needed to install oidc-provider for the sign-in tests")
            subprocess.run(
                [npm, "install", "--prefix", str(target), "--no-audit", "--no-fund", "--save-exact",
                 "--ignore-scripts", "--loglevel=error", f"oidc-provider@{OIDC_PROVIDER_VERSION}"],
                check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=300,
            )  # fmt: skip
        # ESM resolves imports beside the script: it runs from the install folder.
        shutil.copyfile(SCRIPT, target / SCRIPT.name)
    return target


class OidcProvider(ManagedProcess):
    def __init__(self, port: int, redirect_uri: str, log_path: Path) -> None:
        folder = ensure_oidc_provider()
        node = shutil.which("node") or "node"
        super().__init__(
            "oidc-provider",
            [node, str(folder / SCRIPT.name)],
            env={"PORT": str(port), "REDIRECT": redirect_uri, "CLIENT_ID": CLIENT_ID, "CLIENT_SECRET": CLIENT_SECRET},
            cwd=folder,
            log_path=log_path,
            ports={"oidc-provider": port},
        )
        self.port = port

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def is_ready(self) -> bool:
        return self.running and http_answers(f"{self.issuer}/.well-known/openid-configuration")
