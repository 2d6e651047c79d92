"""What every console page must pass in the browser: axe-core's accessibility rules, and at
phone width no page wider than the screen.

axe-core comes from the npm registry, pinned, into the same per-user cache as the Restate
binaries (installed by npm on first use, like `replenisher.stack.install`); it is injected
from that file, so the pages need no network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

AXE_VERSION = "4.14.1"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}


def axe_dir() -> Path:
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home).expanduser() / "stock-replenisher" / f"axe-core-{AXE_VERSION}"


def ensure_axe() -> Path:
    """The path of axe.min.js, installing the pinned axe-core with npm the first time."""
    target = axe_dir()
    script = target / "node_modules" / "axe-core" / "axe.min.js"
    if script.exists():
        return script
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is needed once to fetch axe-core for the accessibility checks (install Node.js)")
    target.mkdir(parents=True, exist_ok=True)
    cmd = [
        npm,
        "install",
        "--prefix",
        str(target),
        "--no-audit",
        "--no-fund",
        "--save-exact",
        "--ignore-scripts",
        "--loglevel=error",
        f"axe-core@{AXE_VERSION}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300, check=False)
    if done.returncode != 0 or not script.exists():
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({done.returncode}): {done.stderr[-2000:]}")
    return script


_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 4).map(n => n.target.join(' ') + ' :: ' + (n.failureSummary || '').replace(/\\s+/g, ' '))
  }));
}"""


async def accessibility_violations(page: Any, axe: Path) -> list[dict[str, Any]]:
    """Every axe-core violation on the page as it is now (WCAG 2 A/AA and best practices)."""
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.add_script_tag(path=str(axe))
    return list(await page.evaluate(_RUN))


async def wider_than_the_screen(page: Any) -> list[str]:
    """Elements that stick out past the right edge of the viewport (a page that scrolls sideways).
    Content inside a box that scrolls sideways by itself (a wide chart) is allowed."""
    return list(
        await page.evaluate(
            """() => {
  const width = document.documentElement.clientWidth;
  const root = document.documentElement.scrollWidth;
  const out = root > width ? ['the page is ' + root + ' px wide'] : [];
  const all = [...document.querySelectorAll('body *')];
  const scrollers = all.filter(el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX));
  for (const el of all) {
    if (scrollers.some(box => box !== el && box.contains(el))) continue;
    const r = el.getBoundingClientRect();
    const name = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '');
    if (r.width && r.right > width + 1) out.push(name + ' ends at ' + Math.round(r.right));
    if (out.length > 8) break;
  }
  return out;
}"""
        )
    )


async def assert_page_fit_for_everyone(page: Any, axe: Path, what: str) -> None:
    violations = await accessibility_violations(page, axe)
    assert violations == [], f"{what}: axe-core found {len(violations)} violations: {violations}"
    if page.viewport_size and page.viewport_size["width"] <= PHONE["width"]:
        wide = await wider_than_the_screen(page)
        assert wide == [], f"{what} at {page.viewport_size['width']} px sticks out: {wide}"
