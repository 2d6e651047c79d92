"""The sign-in tests' processes: a real OpenID provider (node, oidc-provider) and the app behind
the sign-in under hypercorn, each on a free port, stopped after the module even on failure."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from people.accounts import SESSION_SECRET, people_toml
from people.provider import CLIENT_ID, CLIENT_SECRET, OidcProvider
from replenisher.stack.ports import free_port
from replenisher.stack.processes import HypercornApp

PEOPLE_DIR = Path(__file__).parent


@dataclass
class SignedApp:
    process: HypercornApp
    people_file: Path
    audit_file: Path

    @property
    def url(self) -> str:
        return self.process.url

    def audit(self) -> list[dict[str, str]]:
        import json

        if not self.audit_file.exists():
            return []
        return [json.loads(line) for line in self.audit_file.read_text().splitlines()]


def start_app(
    folder: Path, log_dir: Path, *, issuer: str | None = None, port: int | None = None, session_hours: float = 8
) -> SignedApp:
    port = port or free_port()
    people = folder / "people.toml"
    if not people.exists():
        people.write_text(people_toml())
    audit = folder / "audit.jsonl"
    env = {
        "PYTHONPATH": str(PEOPLE_DIR),
        "PEOPLE_FILE": str(people),
        "SESSION_SECRET": SESSION_SECRET,
        "PUBLIC_URL": f"http://127.0.0.1:{port}",
        "SESSION_HOURS": str(session_hours),
        "AUDIT_FILE": str(audit),
    }
    if issuer:
        env |= {"OIDC_ISSUER": issuer, "OIDC_CLIENT_ID": CLIENT_ID, "OIDC_SECRET": CLIENT_SECRET}
    app = HypercornApp(
        "signed_app:app", port, env, name=f"signed-app-{port}", log_path=log_dir / f"signed-app-{port}.log"
    )
    app.start()
    try:
        app.wait_ready()
    except BaseException:
        app.stop()
        raise
    return SignedApp(app, people, audit)


@pytest.fixture(scope="module")
def app_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def provider(app_port: int, log_dir: Path) -> Iterator[OidcProvider]:
    idp = OidcProvider(free_port(), f"http://127.0.0.1:{app_port}/auth/callback", log_dir / "oidc-provider.log")
    idp.start()
    try:
        idp.wait_ready()
        yield idp
    finally:
        idp.stop()


@pytest.fixture(scope="module")
def signed_app(
    provider: OidcProvider, app_port: int, tmp_path_factory: pytest.TempPathFactory, log_dir: Path
) -> Iterator[SignedApp]:
    app = start_app(tmp_path_factory.mktemp("signed"), log_dir, issuer=provider.issuer, port=app_port)
    try:
        yield app
    finally:
        app.process.stop()
