"""Build the replenisher's AWS Lambda deployment zips from pinned, hash-checked wheels.

    python deploy/lambda/build.py                      # both architectures, for the python3.12 runtime
    python deploy/lambda/build.py --arch arm64         # one
    python deploy/lambda/build.py lock                 # re-pin requirements.txt (after pyproject changes)

The zip holds the `replenisher` package and its runtime dependencies (not hypercorn, not the
console's Starlette and Jinja2, not the simulated world, not boto3, which the Lambda runtime ships),
installed for the target with
`pip install --platform ... --only-binary=:all: --require-hashes` from `requirements.txt`, so
every build of one lock is made of the same wheels. Entries are sorted and time-stamped
1980-01-01, so the same inputs give the same zip and the same CodeSha256. Each zip is named
after its content hash: upload it under that name and a changed build can never be mistaken
for the previous one.

The lock covers Python 3.11 and 3.12 on x86_64 and arm64: 3.12 is the Lambda runtime (Amazon
Linux 2023, whose glibc the arm64 wheels need); 3.11 is what the tests run the zip on here.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
PACKAGE_DIR = REPO_ROOT / "services" / "replenisher"
LOCK_FILE = HERE / "requirements.txt"
DEFAULT_OUT = HERE / "build"

RUNTIME_PYTHON = "3.12"
LOCKED_PYTHONS = ("3.11", "3.12")
# Lambda's names for the architectures, and the wheel platforms that run there (manylinux
# 2.28 for wheels such as restate-sdk's arm64 one; Amazon Linux 2023 has glibc 2.34).
PLATFORMS = {
    "x86_64": ("manylinux2014_x86_64", "manylinux_2_28_x86_64"),
    "arm64": ("manylinux2014_aarch64", "manylinux_2_28_aarch64"),
}
# Needed to serve the ASGI app, not on Lambda: the servers, granian's event loop, and the faster transport under the
# adapters' httpx client (without it they use httpx's own, as on Lambda).
SERVER_ONLY = {"hypercorn", "granian", "uvloop", "httpx-aiohttp"}
# The manager's web console (its web framework and its pages' templates) runs beside Restate, never on Lambda.
CONSOLE_ONLY = {"starlette", "jinja2", "argon2-cffi", "authlib", "itsdangerous"}
# The simulated world's web framework: the world is a stand-in for the outside, never deployed with the service.
WORLD_ONLY = {"fastapi"}
# Shipped by Lambda's Python runtime itself (the key reads use them): never bundled, should one become a dependency.
RUNTIME_PROVIDED = {"boto3", "botocore"}
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-.+\.whl$")


class BuildError(RuntimeError):
    pass


def runtime_requirements() -> list[str]:
    """The project's dependencies from pyproject.toml, less those only the ASGI server, the console or
    the simulated world needs and those the Lambda runtime provides."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    left_out = SERVER_ONLY | CONSOLE_ONLY | WORLD_ONLY | RUNTIME_PROVIDED
    return [r for r in project["dependencies"] if _name_of(r) not in left_out]


def _name_of(requirement: str) -> str:
    return _normalise(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0])


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        raise BuildError(f"`{' '.join(cmd)}` failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")


def _target_args(arch: str, python: str) -> list[str]:
    args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", python]
    for platform in PLATFORMS[arch]:
        args += ["--platform", platform]
    return args


# --- lock ---------------------------------------------------------------------------------


def lock(lock_file: Path = LOCK_FILE) -> Path:
    """Resolve the runtime requirements for every target and pin them with every wheel's hash."""
    versions: dict[str, str] = {}
    hashes: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory(prefix="replenisher-lock-") as tmp:
        for python in LOCKED_PYTHONS:
            for arch in PLATFORMS:
                dest = Path(tmp) / f"{python}-{arch}"
                _pip("download", "--dest", str(dest), *_target_args(arch, python), *runtime_requirements())
                for wheel in sorted(dest.glob("*.whl")):
                    match = _WHEEL.match(wheel.name)
                    if match is None:
                        raise BuildError(f"unexpected file from pip download: {wheel.name}")
                    name, version = _normalise(match["name"]), match["version"]
                    if versions.setdefault(name, version) != version:
                        raise BuildError(
                            f"{name} resolves to {versions[name]} and {version} on different targets; "
                            "pin it in pyproject.toml"
                        )
                    hashes.setdefault(name, set()).add(hashlib.sha256(wheel.read_bytes()).hexdigest())
    lines = [
        "# The Lambda zip's dependencies, pinned with the hash of every wheel it may use",
        f"# (Python {', '.join(LOCKED_PYTHONS)} on {', '.join(PLATFORMS)}).",
        "# Generated by `python deploy/lambda/build.py lock` from pyproject.toml; do not edit.",
    ]
    for name in sorted(versions):
        lines.append(f"{name}=={versions[name]} \\")
        digests = sorted(hashes[name])
        lines += [f"    --hash=sha256:{h}" + (" \\" if i < len(digests) - 1 else "") for i, h in enumerate(digests)]
    lock_file.write_text("\n".join(lines) + "\n")
    return lock_file


# --- zip ----------------------------------------------------------------------------------


def _copy_package(source: Path, dest: Path) -> None:
    shutil.copytree(
        source,
        dest / "replenisher",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )


def _write_zip(source: Path, target: Path) -> None:
    files = sorted(p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for path in files:
            info = zipfile.ZipInfo(path.relative_to(source).as_posix(), date_time=_ZIP_EPOCH)
            mode = 0o755 if os.access(path, os.X_OK) else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())


def code_sha256(path: Path) -> str:
    """The hash as Lambda reports it (CodeSha256): base64 of the SHA-256 of the zip."""
    return base64.b64encode(hashlib.sha256(path.read_bytes()).digest()).decode()


def build(
    arch: str,
    python: str = RUNTIME_PYTHON,
    out_dir: Path = DEFAULT_OUT,
    *,
    package_dir: Path = PACKAGE_DIR,
    lock_file: Path = LOCK_FILE,
) -> dict:
    if arch not in PLATFORMS:
        raise BuildError(f"unknown architecture {arch!r}: use one of {', '.join(PLATFORMS)}")
    if python not in LOCKED_PYTHONS:
        raise BuildError(f"the lock covers Python {', '.join(LOCKED_PYTHONS)}, not {python}")
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"replenisher-py{python.replace('.', '')}-{arch}"
    with tempfile.TemporaryDirectory(prefix="replenisher-lambda-") as tmp:
        root = Path(tmp) / "root"
        _pip(
            "install",
            "--target",
            str(root),
            "--no-deps",
            "--require-hashes",
            "--no-compile",
            *_target_args(arch, python),
            "-r",
            str(lock_file),
        )
        # pip leaves console scripts that point at this machine's interpreter; Lambda has no use for them.
        shutil.rmtree(root / "bin", ignore_errors=True)
        _copy_package(package_dir, root)
        staging = Path(tmp) / f"{stem}.zip"
        _write_zip(root, staging)
        digest = hashlib.sha256(staging.read_bytes()).hexdigest()[:12]
        for old in out_dir.glob(f"{stem}-*.zip"):
            old.unlink()
        target = out_dir / f"{stem}-{digest}.zip"
        shutil.move(staging, target)
    return {
        "zip": str(target),
        "architecture": arch,
        "python": python,
        "bytes": target.stat().st_size,
        "code_sha256": code_sha256(target),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", choices=["zip", "lock"], default="zip")
    parser.add_argument("--arch", action="append", choices=sorted(PLATFORMS), help="default: all")
    parser.add_argument("--python", default=RUNTIME_PYTHON, help=f"default: {RUNTIME_PYTHON}, the template's runtime")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--package-dir", type=Path, default=PACKAGE_DIR, help="the replenisher package to ship")
    parser.add_argument("--json", action="store_true", help="print one JSON object per zip")
    args = parser.parse_args(argv)
    try:
        if args.command == "lock":
            print(f"wrote {lock()}")
            return 0
        for arch in args.arch or list(PLATFORMS):
            built = build(arch, args.python, args.out, package_dir=args.package_dir)
            if args.json:
                print(json.dumps(built))
            else:
                print(f"{built['zip']}  {built['bytes']} bytes  CodeSha256={built['code_sha256']}")
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
