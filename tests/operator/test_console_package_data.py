"""The console's and the timeline's templates, stylesheets and scripts travel with the package:
pyproject's package data names every one of them, so a wheel built from it (and an install from
that wheel) renders the same pages as this checkout."""

from __future__ import annotations

import tomllib
from pathlib import Path

from replenisher import templating
from support import REPO_ROOT

PACKAGE = Path(templating.__file__).parent


def test_every_template_and_static_file_is_package_data() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    package_data: dict[str, list[str]] = pyproject["tool"]["setuptools"]["package-data"]
    files = [
        path
        for folder in (
            templating.CONSOLE_TEMPLATES,
            templating.CONSOLE_STATIC,
            templating.TIMELINE_TEMPLATES,
            templating.TIMELINE_STATIC,
        )
        for path in folder.iterdir()
        if path.is_file()
    ]
    assert len(files) >= 20, files
    for path in files:
        package_dir = path.parent.parent
        package = "replenisher." + package_dir.relative_to(PACKAGE).as_posix().replace("/", ".")
        inside = path.relative_to(package_dir)
        patterns = package_data.get(package, [])
        assert any(inside.match(p) for p in patterns), f"{path} is in no package-data pattern of {package}: {patterns}"
