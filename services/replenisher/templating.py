"""The Jinja2 environment the console's pages and the timeline pages render from.

Autoescape is on for every template: a value is escaped where the template writes it, so a SKU
name, a supplier's text or an error message always shows as text. Markup lives in the templates
(`replenisher/console/templates`, `replenisher/timeline/templates`), never in Python strings.

Templates are written one element a line, indented; the loader joins an HTML template's lines,
dropping each line's indentation and its line break, so a page is served as compact as before and
no stray space appears between inline elements. A space that matters is written inside a line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

PACKAGE = Path(__file__).parent
CONSOLE_TEMPLATES = PACKAGE / "console" / "templates"
TIMELINE_TEMPLATES = PACKAGE / "timeline" / "templates"
IDENTITY_TEMPLATES = PACKAGE / "identity" / "templates"
CONSOLE_STATIC = PACKAGE / "console" / "static"
# The timeline's stylesheet: served to the console's pages, and written into a timeline page
# someone downloads (which must show without the console), so the loader finds it too.
TIMELINE_STATIC = PACKAGE / "timeline" / "static"


class CompactLoader(FileSystemLoader):
    """Templates from these folders; an `.html` one with its lines joined and unindented."""

    def get_source(self, environment: Environment, template: str) -> tuple[str, str | None, Callable[[], bool]]:
        source, filename, uptodate = super().get_source(environment, template)
        if template.endswith(".html"):
            source = "".join(line.lstrip() for line in source.splitlines())
        return source, filename, uptodate


def fmt(value: Any, spec: str) -> str:
    """Python's format(): `{{ price|fmt(".2f") }}` reads as the f-string it replaces."""
    return format(value, spec)


environment = Environment(
    loader=CompactLoader([CONSOLE_TEMPLATES, TIMELINE_TEMPLATES, IDENTITY_TEMPLATES, TIMELINE_STATIC]),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=False,
    auto_reload=False,
)
environment.filters["fmt"] = fmt


def render(template: str, **context: Any) -> str:
    return environment.get_template(template).render(**context)
