"""The Lambda deployment as shipped: the CloudFormation template lints clean and registers Restate
against published versions only; the zip holds the pinned wheels for its architecture and
runtime, the handler, and nothing from the test world."""

from __future__ import annotations

import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file
from cfnlint.decode import decode
from packaging.requirements import Requirement

from .stacks import BUILD_SCRIPT, LAMBDA_DIR, LAMBDA_HANDLER, build_lambda_zip, load_script

TEMPLATE = LAMBDA_DIR / "template.yaml"
# ELF e_machine of the native extensions Lambda loads on each architecture.
ELF_MACHINE = {"x86_64": 0x3E, "arm64": 0xB7}
# Lambda's limit on the unpacked code of a function.
UNZIPPED_LIMIT = 250 * 1024 * 1024


build = load_script(BUILD_SCRIPT, "lambda_build")


def _template() -> Any:
    template, matches = decode(str(TEMPLATE))
    assert not matches, matches
    return template


# --- the template -------------------------------------------------------------------------


def test_template_passes_cfn_lint() -> None:
    matches = lint_file(TEMPLATE, config=ManualArgs(regions=["us-east-1", "eu-central-1"]))
    assert matches == [], "\n".join(str(m) for m in matches)


def test_cfn_lint_does_catch_a_broken_template(tmp_path: Path) -> None:
    # The clean result above means something only if the linter flags a real mistake.
    broken = tmp_path / "template.yaml"
    broken.write_text(TEMPLATE.read_text().replace("!GetAtt Version.Version", "!GetAtt Version.Nope"))
    assert lint_file(broken, config=ManualArgs(regions=["us-east-1"])) != []


def test_restate_is_registered_against_a_published_version_that_outlives_updates() -> None:
    resources = _template()["Resources"]
    outputs = _template()["Outputs"]
    version = resources["Version"]
    assert version["Type"] == "AWS::Lambda::Version"
    # A code change replaces the version resource; the old version must stay for its in-flight runs.
    assert version["DeletionPolicy"] == "Retain" and version["UpdateReplacePolicy"] == "Retain"
    # Both publish a new version when they change (create-only properties of a version).
    assert version["Properties"]["CodeSha256"] == {"Ref": "CodeSha256"}
    assert version["Properties"]["Description"] == {"Fn::Sub": "release ${Release}, code ${CodeSha256}"}
    assert outputs["VersionArn"]["Value"] == {"Ref": "Version"}


def test_the_role_restate_assumes_may_invoke_versions_but_never_latest() -> None:
    role = _template()["Resources"]["RestateInvokerRole"]["Properties"]
    trust = role["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"AWS": {"Ref": "RestatePrincipalArn"}} and trust["Action"] == "sts:AssumeRole"
    statements = role["Policies"][0]["PolicyDocument"]["Statement"]
    allow = [s for s in statements if s["Effect"] == "Allow"]
    deny = [s for s in statements if s["Effect"] == "Deny"]
    assert [s["Resource"] for s in allow] == [{"Fn::Sub": "${Function.Arn}:*"}]
    assert deny[0]["Action"] == "lambda:InvokeFunction"
    assert {"Fn::Sub": "${Function.Arn}:$LATEST"} in deny[0]["Resource"]
    assert {"Fn::GetAtt": ["Function", "Arn"]} in deny[0]["Resource"]


def test_template_and_build_agree_on_handler_runtime_and_architectures() -> None:
    template = _template()
    function = template["Resources"]["Function"]["Properties"]
    assert function["Handler"] == LAMBDA_HANDLER
    assert function["Runtime"] == f"python{build.RUNTIME_PYTHON}"
    assert set(template["Parameters"]["Architecture"]["AllowedValues"]) == set(build.PLATFORMS)


# --- the lock -----------------------------------------------------------------------------


def _locked() -> dict[str, str]:
    text = (LAMBDA_DIR / "requirements.txt").read_text()
    return {m[1]: m[2] for m in re.finditer(r"^([a-z0-9-]+)==(\S+) \\$", text, re.MULTILINE)}


def test_lock_pins_every_runtime_dependency_within_pyproject_ranges() -> None:
    locked = _locked()
    wanted = [Requirement(r) for r in build.runtime_requirements()]
    assert "hypercorn" not in {r.name for r in wanted}, "the ASGI server has no place on Lambda"
    for requirement in wanted:
        name = build._normalise(requirement.name)
        assert name in locked, f"{name} is missing from deploy/lambda/requirements.txt: run build.py lock"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"{name}=={locked[name]} is outside pyproject's {requirement.specifier}: run build.py lock"
        )


def test_every_pin_carries_a_hash() -> None:
    text = (LAMBDA_DIR / "requirements.txt").read_text()
    blocks = re.split(r"\n(?=[a-z0-9-]+==)", text.split("\n", 3)[3])
    assert len(blocks) == len(_locked()) > 5
    assert all("--hash=sha256:" in block for block in blocks)


# --- the zip ------------------------------------------------------------------------------


def _elf_machine(data: bytes) -> int:
    assert data[:4] == b"\x7fELF", "not an ELF file"
    return int.from_bytes(data[18:20], "little")


def test_zip_holds_the_locked_wheels_for_its_architecture_and_runtime(runtime_lambda_zip: dict[str, Any]) -> None:
    arch = runtime_lambda_zip["architecture"]
    tag = f"cpython-{build.RUNTIME_PYTHON.replace('.', '')}"
    with zipfile.ZipFile(runtime_lambda_zip["zip"]) as zf:
        names = zf.namelist()
        assert f"{LAMBDA_HANDLER.rsplit('.', 1)[0].replace('.', '/')}.py" in names
        assert "replenisher/durable/app.py" in names
        assert not [n for n in names if n.startswith(("simulated_world/", "tests/", "hypercorn/"))]
        assert not [n for n in names if "__pycache__" in n]

        extensions = [n for n in names if n.endswith(".so")]
        assert any(n.startswith("restate/_internal.") for n in extensions)
        assert any(n.startswith("pydantic_core/") for n in extensions)
        for name in extensions:
            assert tag in name, f"{name} is not built for Python {build.RUNTIME_PYTHON}"
            assert _elf_machine(zf.read(name)[:20]) == ELF_MACHINE[arch], f"{name} is not for {arch}"

        installed = {}
        for name in names:
            match = re.match(r"^([^/]+)-([^-/]+)\.dist-info/METADATA$", name)
            if match:
                installed[build._normalise(match[1])] = match[2]
        assert installed == _locked()
        assert sum(info.file_size for info in zf.infolist()) < UNZIPPED_LIMIT


@pytest.mark.slow
def test_zip_is_reproducible_and_named_after_its_content(tmp_path: Path) -> None:
    # From one snapshot of the package, so that only the build itself could differ.
    package = shutil.copytree(build.PACKAGE_DIR, tmp_path / "replenisher", ignore=shutil.ignore_patterns("__pycache__"))
    first = build_lambda_zip(tmp_path / "first", package_dir=package)
    second = build_lambda_zip(tmp_path / "second", package_dir=package)
    assert first["code_sha256"] == second["code_sha256"]
    assert Path(first["zip"]).name == Path(second["zip"]).name
    assert build.code_sha256(Path(first["zip"])) == first["code_sha256"]


def test_build_refuses_an_unlocked_python(tmp_path: Path) -> None:
    with pytest.raises(build.BuildError, match="lock covers"):
        build.build("x86_64", "3.9", tmp_path)
