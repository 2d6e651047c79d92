"""Request identity: with REPLENISHER_IDENTITY_KEYS set, the service serves only requests signed by
that Restate server; anything else that reaches its port gets 401 and changes nothing."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import pytest_asyncio

from e2e.scenario import Scenario
from replenisher.config import Settings
from replenisher.stack.admin import Admin
from support import eventually, service_env

from .identity import IdentityKey, base58
from .stacks import ServiceStack, register, start_restate, start_service, start_world, stop_all

_HTTP = httpx.Timeout(30.0, connect=5.0)
# The restate-server 1.7 option (`[worker.invoker] request-identity-private-key-pem-file`).
PRIVATE_KEY_ENV = "RESTATE_WORKER__INVOKER__REQUEST_IDENTITY_PRIVATE_KEY_PEM_FILE"
MANIFEST = "application/vnd.restate.endpointmanifest.v3+json"


# --- the key format, without processes ------------------------------------------------------


def test_base58_is_bitcoins_alphabet_with_leading_zeros_as_ones() -> None:
    assert base58(b"hello world") == "StV1DL6CwTryKyV"
    assert base58(b"\0\0\x01") == "112"


def test_settings_take_comma_separated_public_keys() -> None:
    a, b = IdentityKey.generate().public_key, IdentityKey.generate().public_key
    assert Settings.model_validate({"identity_keys": f" {a}, {b} ,"}).identity_keys == (a, b)
    assert Settings().identity_keys == ()


@pytest.mark.parametrize("bad", ["nonsense", "publickeyv1_", "publickeyv1_0OIl0OIl0OIl0OIl0OIl0OIl0OIl0OIl0OI"])
def test_settings_refuse_what_is_not_a_restate_public_key(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Restate public key"):
        Settings.model_validate({"identity_keys": bad})


# --- a Restate server that signs, a service that checks -------------------------------------


@pytest.fixture(scope="module")
def key() -> IdentityKey:
    return IdentityKey.generate()


@pytest.fixture(scope="module")
def signed_stack(tmp_path_factory: pytest.TempPathFactory, key: IdentityKey) -> Iterator[ServiceStack]:
    root = tmp_path_factory.mktemp("identity-stack")
    pem = key.write_pem(root / "restate-identity.pem")
    restate = world = service = None
    try:
        restate = start_restate(root / "restate-data", root / "restate-server.log", {PRIVATE_KEY_ENV: str(pem)})
        world = start_world(restate.ingress_url, root / "world.log")
        env = service_env(world.url, {"REPLENISHER_IDENTITY_KEYS": key.public_key})
        service = start_service(env, root / "replenisher.log")
        yield ServiceStack(restate, world, service, register(restate.admin_url, service.url))
    finally:
        stop_all(service, world, restate)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def signed_scenario(signed_stack: ServiceStack) -> AsyncIterator[Scenario]:
    async with (
        httpx.AsyncClient(base_url=signed_stack.restate.ingress_url, timeout=_HTTP) as ingress,
        httpx.AsyncClient(base_url=signed_stack.world.url, timeout=_HTTP) as world,
    ):
        yield Scenario(ingress, world, "identity")


def test_restate_server_loads_the_key_under_the_public_key_we_derive(
    signed_stack: ServiceStack, key: IdentityKey
) -> None:
    log = signed_stack.restate.log_path.read_text()
    assert "Loaded request identity key" in log
    assert set(re.findall(r"publickeyv1_[1-9A-Za-z]+", log)) == {key.public_key}


async def test_signed_requests_run_a_whole_replenishment(signed_scenario: Scenario) -> None:
    # Registration (discovery) already went through signed; now every kind of invocation does.
    scenario = signed_scenario
    await scenario.setup()
    run_id = (await scenario.check())["started"]
    request = await scenario.pending_approval()
    await scenario.decide(request["po_number"], approved=True)
    outcome = await scenario.outcome(run_id, within=40)
    assert outcome["outcome"] == "received"
    assert len(await scenario.orders()) == 1


async def test_a_correct_signature_made_here_is_accepted(signed_stack: ServiceStack, key: IdentityKey) -> None:
    # The forgeries below are refused for what is wrong with them, not for how we build tokens.
    async with httpx.AsyncClient(base_url=signed_stack.service.url, timeout=_HTTP) as service:
        response = await service.get("/discover", headers={"accept": MANIFEST, **key.headers("/discover")})
    assert response.status_code == 200
    assert {s["name"] for s in response.json()["services"]} == {
        "SkuAgent",
        "Replenish",
        "RunArchive",
        "AuditLog",
        "ServiceAnswered",
        "SkuList",
    }


def _forgeries(key: IdentityKey, path: str, elsewhere: str) -> dict[str, dict[str, str]]:
    other = IdentityKey.generate()
    return {
        "unsigned": {},
        "signed by another key": other.headers(path),
        "another key claiming ours": other.headers(path, kid=key.public_key),
        "our key, for another path": key.headers(elsewhere),
        "our key, expired": key.headers(path, now=time.time() - 600),
        "scheme without token": {"x-restate-signature-scheme": "v1"},
    }


async def test_unsigned_or_wrongly_signed_requests_get_401_and_change_nothing(
    signed_stack: ServiceStack, signed_scenario: Scenario, key: IdentityKey
) -> None:
    scenario = Scenario(signed_scenario.ingress, signed_scenario.world, "forged")
    await scenario.setup()
    admin = Admin(signed_stack.restate.admin_url)
    path = f"/invoke/SkuAgent/{scenario.sku}/check"

    async with httpx.AsyncClient(base_url=signed_stack.service.url, timeout=_HTTP) as service:
        for target, elsewhere in ((path, "/discover"), ("/discover", path)):
            for name, headers in _forgeries(key, target, elsewhere).items():
                response = await _send(service, target, headers)
                assert response.status_code == 401, f"{name} to {target}: {response.status_code} {response.text[:200]}"

    assert await scenario.stock_reads() == 0
    state = await admin.asql(
        f"SELECT key FROM state WHERE service_name = 'SkuAgent' AND service_key = '{scenario.sku}'"
    )
    assert state == []
    # The same check through Restate, signed, does read the stock: what was refused would have.
    await scenario.check()
    await eventually(scenario.stock_reads, timeout=10, what="a signed check to read the stock")


async def _send(service: httpx.AsyncClient, target: str, headers: dict[str, str]) -> httpx.Response:
    if target == "/discover":
        return await service.get(target, headers={"accept": MANIFEST, **headers})
    # What an invocation looks like on the wire: the service must refuse before reading it.
    invocation = {"content-type": "application/vnd.restate.invocation.v5", **headers}
    return await service.post(target, content=b"\0" * 16, headers=invocation)
