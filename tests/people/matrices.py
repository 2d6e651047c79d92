"""Authority matrices for the people tests, as the TOML a team would write."""

from __future__ import annotations


def people_toml(
    limits: dict[str, float], *, threshold: float | None = None, viewers: tuple[str, ...] = (), extra: str = ""
) -> str:
    """Approvers with these limits (in this order), viewers, an optional two-person threshold, then `extra`."""
    lines = [f"two_person_threshold = {threshold:g}"] if threshold is not None else []
    for person, limit in limits.items():
        lines += [*person_lines(person, "approver"), f"limit = {limit:g}"]
    for person in viewers:
        lines += person_lines(person, "viewer")
    return "\n".join(lines) + "\n" + extra


def person_lines(person: str, role: str) -> list[str]:
    return [
        "",
        "[[people]]",
        f'id = "{person}"',
        f'name = "{person.title()}"',
        f'email = "{person}@plant.example"',
        f'roles = ["{role}"]',
    ]


TEAM = people_toml({"bo": 100, "pia": 1000, "dee": 10000, "cy": 10000}, threshold=1000)
"""The stack tests' team: a buyer up to 100, a plant manager up to 1,000, a director and a finance
head up to 10,000; orders above 1,000 need two people (`people_service` runs the service with it)."""
