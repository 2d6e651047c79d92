"""Stacks of their own for the deployment tests: a Restate server (or three), the world, and the
replenisher as a Lambda function or on hypercorn.

The session stack in tests/conftest.py is shared by the other end-to-end tests; these tests
change how the services are reached (a Lambda stand-in, signed requests, a cluster), so each
module starts its own processes on free ports and stops them at the end.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from replenisher.stack.local import SERVICE_APP, WORLD_APP
from replenisher.stack.ports import LOOPBACK, RestatePorts, free_port
from replenisher.stack.processes import HypercornApp, ManagedProcess, http_ok
from replenisher.stack.runtime import BinaryRuntime
from support import REPO_ROOT, RESTATE_TEST_ENV, world_env

LAMBDA_DIR = REPO_ROOT / "deploy" / "lambda"
BUILD_SCRIPT = LAMBDA_DIR / "build.py"
LAMBDA_HANDLER = "replenisher.durable.lambda_handler.handler"
LOCAL_LAMBDA = Path(__file__).resolve().parent / "local_lambda.py"
# This machine's architecture in Lambda's names.
LOCAL_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine().lower()]
LOCAL_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
# One-line results worth seeing in the output of a whole run (the cluster test's tally).
SUMMARY_LINES: list[str] = []


def load_script(path: Path, name: str) -> ModuleType:
    """Import a script under deploy/ by its path (`deploy/lambda` is no importable name)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pydantic resolves the module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def start_restate(data_dir: Path, log_path: Path, extra_env: Mapping[str, str] | None = None) -> BinaryRuntime:
    runtime = BinaryRuntime(
        RestatePorts.free(),
        data_dir,
        {**RESTATE_TEST_ENV, **(extra_env or {})},
        log_path=log_path,
        config_file=REPO_ROOT / "restate.toml",
    )
    runtime.start()
    try:
        runtime.wait_ready()
    except Exception:
        runtime.stop()
        raise
    return runtime


def start_world(
    ingress_url: str, log_path: Path, extra_env: Mapping[str, str] | None = None, port: int | None = None
) -> HypercornApp:
    env = world_env(ingress_url, extra_env)
    world = HypercornApp(WORLD_APP, port or free_port(), env, name="world", log_path=log_path)
    world.start()
    try:
        world.wait_ready()
    except Exception:
        world.stop()
        raise
    return world


def start_service(env: Mapping[str, str], log_path: Path) -> HypercornApp:
    service = HypercornApp(SERVICE_APP, free_port(), env, name="replenisher", log_path=log_path)
    service.start()
    try:
        service.wait_ready()
    except Exception:
        service.stop()
        raise
    return service


def register(admin_url: str, uri: str, *, use_http_11: bool = False) -> dict[str, Any]:
    """`POST /deployments`; returns the deployment as the admin API describes it."""
    body = {"uri": uri, "force": True, "use_http_11": use_http_11}
    response = httpx.post(f"{admin_url}/deployments", json=body, timeout=60.0)
    assert response.is_success, f"registering {uri}: {response.status_code} {response.text}"
    deployment_id = response.json()["id"]
    details = httpx.get(f"{admin_url}/deployments/{deployment_id}", timeout=_TIMEOUT)
    assert details.is_success, details.text
    return details.json()


def stop_all(*processes: ManagedProcess | None) -> None:
    for process in processes:
        if process is not None:
            process.stop()


# --- Lambda -------------------------------------------------------------------------------


def build_lambda_zip(
    out_dir: Path, arch: str = LOCAL_ARCH, python: str | None = None, package_dir: Path | None = None
) -> dict[str, Any]:
    """Run deploy/lambda/build.py as a user would; returns what it printed about the zip."""
    cmd = [sys.executable, str(BUILD_SCRIPT), "--arch", arch, "--out", str(out_dir), "--json"]
    if python:
        cmd += ["--python", python]
    if package_dir:
        cmd += ["--package-dir", str(package_dir)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}"
    built: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return built


def unpack(zip_path: Path, dest: Path) -> Path:
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(dest)
    return dest


# What Lambda's Python runtime ships beside the function's code (in /var/runtime, after the
# code on the path): boto3 and the packages it imports.
RUNTIME_PACKAGES = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "six", "urllib3")


def lambda_runtime(dest: Path) -> Path:
    """A stand-in for the runtime's own packages: links to this machine's copies of them."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in RUNTIME_PACKAGES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, f"{name} is not installed: make setup installs the '[aws]' extra"
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        link = dest / source.name
        if not link.exists():
            link.symlink_to(source, target_is_directory=source.is_dir())
    return dest


class LocalLambda(ManagedProcess):
    """tests/deploy/local_lambda.py serving the unpacked zip, with nothing else on its path but
    the runtime's own packages."""

    def __init__(
        self,
        code_dir: Path,
        port: int,
        env: Mapping[str, str],
        log_path: Path,
        invocations: Path,
        environments: int = 2,
    ) -> None:
        self.port = port
        self.invocations = invocations
        argv = [
            sys.executable,
            "-I",  # no PYTHON* variables, no user site, no script dir on the path
            "-S",  # no site-packages: only the zip's own packages, the runtime's and the standard library
            str(LOCAL_LAMBDA),
            "--code",
            str(code_dir),
            "--runtime",
            str(lambda_runtime(log_path.parent / "lambda-runtime")),
            "--handler",
            LAMBDA_HANDLER,
            "--port",
            str(port),
            "--environments",
            str(environments),
            "--invocations",
            str(invocations),
        ]
        super().__init__("local-lambda", argv, env=env, log_path=log_path, ports={"local lambda": port})

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def is_ready(self) -> bool:
        return http_ok(f"{self.url}/health")

    def calls(self, path_prefix: str = "") -> list[dict[str, Any]]:
        try:
            lines = self.invocations.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [c for c in map(json.loads, lines) if c["path"].startswith(path_prefix)]


@dataclass
class ServiceStack:
    """One Restate server, the world pointed at it, and the services registered with it."""

    restate: BinaryRuntime
    world: HypercornApp
    service: ManagedProcess
    deployment: dict[str, Any]

    def stop(self) -> None:
        stop_all(self.service, self.world, self.restate)
