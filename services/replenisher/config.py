"""Settings from the environment (pydantic-settings), read by the composition root (`replenisher.wiring.bootstrap`).

Each field `x` is the variable `REPLENISHER_X` (the key alone is `ANTHROPIC_API_KEY`); an empty
variable counts as unset. A bad value stops the service at start with the variable and the
reason (`load_settings`). The variables, defaults and meanings: docs/operating/settings.md.

Every wait is in business days on the site calendar (`REPLENISHER_CALENDAR_FILE`; Monday to
Friday, UTC by default); `REPLENISHER_DAY_SECONDS` compresses a calendar day (a real day by
default, about a second in the demo, a fraction of a second in tests). A compressed clock
needs a fixed origin shared with the world: `REPLENISHER_CLOCK_WALL_ORIGIN` (epoch seconds)
is calendar instant `REPLENISHER_CLOCK_CALENDAR_ORIGIN` (ISO date-time or epoch seconds).
Without one, the origin is when the settings were read (`started_at`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretBytes, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from replenisher.addresses import DEFAULT_WORLD_URL
from replenisher.domain.authority import AuthorityFileError, AuthorityMatrix, load_authority
from replenisher.domain.calendar import DAY, BusinessCalendar, CalendarClock, ClockOrigin, Instant, load_calendar
from replenisher.domain.credentials import BadToken, load_token_key
from replenisher.domain.escalation import ApprovalPolicy
from replenisher.domain.sku import check_fraction
from replenisher.domain.waits import WaitDays
from replenisher.inbound.stamp import DoorKeyError, load_door_key

# A 32-byte Ed25519 public key in base58, as restate-server logs it when it loads its private key.
_PUBLIC_KEY = re.compile(r"publickeyv1_[1-9A-HJ-NP-Za-km-z]{32,44}")
PREFIX = "REPLENISHER_"
MAX_SERVICE_WORKERS = 64
"""The most service worker processes one host is given: far above any core count it would pay on."""
LOADED = frozenset({"calendar", "door_key", "people", "personal_token_key", "started_at"})
"""Fields no variable sets: loaded from the file a variable names, or taken when the settings are read."""


class ServiceProcesses(BaseSettings):
    """How the service is run on its host: what the ASGI server's launcher (`make up`, `replenisher.stack`,
    the test fixtures, the benches) reads, before any worker starts (`service_workers`)."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, env_ignore_empty=True, populate_by_name=True, extra="ignore")

    # Worker processes of the ASGI server, each with its own event loop and its own parts (the app
    # factory bootstraps in each); more than one only where the service's one core is the limit.
    service_workers: int = Field(default=1, ge=1, le=MAX_SERVICE_WORKERS)


class Settings(ServiceProcesses):
    world_url: str = DEFAULT_WORLD_URL
    ingress_url: str | None = Field(
        default=None, description="Restate's ingress, for the note that the service answered after failed attempts"
    )
    day_seconds: float = Field(default=86_400.0, gt=0)
    calendar_file: str | None = None
    calendar: BusinessCalendar = Field(default_factory=BusinessCalendar, description="loaded from calendar_file")
    approval_reminders: Annotated[tuple[float, ...], NoDecode] = ApprovalPolicy().reminders
    backup_approver: str | None = ApprovalPolicy().backup_approver
    clock_wall_origin: float | None = None
    clock_calendar_origin: Instant | None = None
    check_interval_days: float = Field(default=1.0, gt=0)
    rest_after_failure_days: float = Field(default=5.0, ge=0)
    decider: Literal["offline", "claude"] = "offline"
    code_version: str = Field(default="dev", max_length=64, description="stamped on every turn this process first runs")
    step_max_attempts: int = Field(default=6, ge=1)
    step_initial_retry_ms: int = Field(default=2_000, ge=1)
    step_max_retry_ms: int = Field(default=60_000, ge=1)
    approval_wait_days: float = Field(default=WaitDays().approval, gt=0)
    reply_wait_days: float = Field(default=WaitDays().supplier_reply, gt=0)
    goods_grace_days: float = Field(default=WaitDays().goods_grace, ge=0)
    # Public keys (`publickeyv1_...`) of the Restate servers allowed to call the service. Empty:
    # any caller that reaches the port is served, so keep the port private.
    identity_keys: Annotated[tuple[str, ...], NoDecode] = ()
    # The key the inbound endpoint stamps what it forwards with (REPLENISHER_DOOR_KEY_FILE): a
    # sender stated on `deliver` counts only under its stamp. None: every stated sender is an operator's say.
    door_key_file: str | None = None
    door_key: SecretBytes | None = Field(default=None, description="loaded from door_key_file")
    # The authority matrix (REPLENISHER_PEOPLE_FILE, docs/operating/people.md): with it, runs started
    # from then on accept an approval only from a person whose limit covers the order. None: as before.
    people_file: str | None = None
    people: AuthorityMatrix | None = Field(default=None, description="loaded from people_file")
    # The key personal tokens are made and checked with (REPLENISHER_PERSONAL_TOKEN_KEY_FILE, 64 hex
    # characters, the console's too): under a matrix, a decision on the ingress counts only with its
    # person's token, so reaching the ingress is not enough to approve as someone.
    personal_token_key_file: str | None = None
    personal_token_key: SecretBytes | None = Field(default=None, description="loaded from personal_token_key_file")
    # The Claude decider (REPLENISHER_DECIDER=claude); see docs/agent/claude.md.
    anthropic_api_key: SecretStr | None = Field(default=None, validation_alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = None
    claude_model: str = "claude-sonnet-4-6"
    claude_max_tokens: int = Field(default=1024, ge=64, le=8192)
    claude_timeout_seconds: float = Field(default=60.0, gt=0)
    claude_max_retries: int = Field(default=2, ge=0, le=10)
    claude_asks_per_turn: int = Field(default=3, ge=1, le=5)
    claude_budget_usd: float = Field(default=1.0, ge=0)
    claude_read_replies: bool = True
    claude_input_usd_per_mtok: float | None = Field(default=None, ge=0)
    claude_output_usd_per_mtok: float | None = Field(default=None, ge=0)
    # Where model calls in flight are written down outside the journal, so a call answered
    # just before the process died is still charged when its step runs again (on this host).
    model_spool_dir: Path | None = None
    # Without a configured origin a compressed clock starts when the settings were read (the
    # world then disagrees on the date: the stack and the test fixtures always pass one).
    started_at: float = Field(default_factory=time.time, description="when these settings were read")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment: no .env file, no secrets directory."""
        return init_settings, _Variables(settings_cls)

    @field_validator("approval_reminders", mode="before")
    @classmethod
    def _points(cls, value: object) -> object:
        if isinstance(value, str):
            return () if value.strip().lower() == "none" else tuple(p for p in value.replace(",", " ").split())
        return value

    @field_validator("backup_approver", mode="before")
    @classmethod
    def _nobody(cls, value: object) -> object:
        return None if isinstance(value, str) and value.strip().lower() == "none" else value

    @property
    def approval_policy(self) -> ApprovalPolicy:
        return ApprovalPolicy(reminders=self.approval_reminders, backup_approver=self.backup_approver)

    @field_validator("identity_keys", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        return tuple(k.strip() for k in value.split(",") if k.strip()) if isinstance(value, str) else value

    @field_validator("identity_keys")
    @classmethod
    def _restate_public_keys(cls, keys: tuple[str, ...]) -> tuple[str, ...]:
        for key in keys:
            if not _PUBLIC_KEY.fullmatch(key):
                raise ValueError(f"{key[:24]!r}... is not a Restate public key (publickeyv1_ then base58)")
        return keys

    @property
    def waits(self) -> WaitDays:
        return WaitDays(
            approval=self.approval_wait_days,
            supplier_reply=self.reply_wait_days,
            goods_grace=self.goods_grace_days,
        )

    @property
    def step_initial_retry(self) -> timedelta:
        return timedelta(milliseconds=self.step_initial_retry_ms)

    @property
    def step_max_retry(self) -> timedelta:
        return timedelta(milliseconds=self.step_max_retry_ms)

    def days(self, n: float) -> timedelta:
        return timedelta(seconds=n * self.day_seconds)

    @property
    def clock(self) -> CalendarClock:
        """The site calendar through this process's wall clock; each run fixes a copy at its start."""
        if self.clock_wall_origin is not None:
            wall = self.clock_wall_origin
        else:
            wall = 0.0 if self.day_seconds == DAY else self.started_at
        origin = ClockOrigin.at(wall, self.clock_calendar_origin)
        return CalendarClock(calendar=self.calendar, day_seconds=self.day_seconds, origin=origin)

    def after(self, wall: float, business_days: float) -> timedelta:
        """How long from `wall` until `business_days` business days later, on the site calendar."""
        return timedelta(seconds=self.clock.after(wall, business_days) - wall)

    def check_after(self, wall: float, business_days: float, sku: str) -> timedelta:
        """How long from `wall` until the SKU's next check: about `business_days` later, at the SKU's
        own time of the working day (`check_fraction`), so many SKUs' checks spread over the day."""
        return timedelta(seconds=self.clock.spread_after(wall, business_days, check_fraction(sku)) - wall)


class _Variables(EnvSettingsSource):
    """The process environment, for every field but those loaded from a file (`LOADED`)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if field_name in LOADED:
            return None, field_name, False
        return super().get_field_value(field, field_name)


def variable(field: str) -> str:
    """The environment variable that sets a field (`day_seconds`: `REPLENISHER_DAY_SECONDS`)."""
    info = Settings.model_fields.get(field)
    if info is not None and isinstance(info.validation_alias, str):
        return info.validation_alias
    return field if field.isupper() else PREFIX + field.upper()


def service_workers(env: Mapping[str, str] | None = None) -> int:
    """`REPLENISHER_SERVICE_WORKERS` of `env` (the process's environment by default), validated as the
    service validates it; a bad value is a `ValueError` naming the variable, the value and the range."""
    name = variable("service_workers")
    raw = (os.environ if env is None else env).get(name, "").strip()
    if not raw:
        return ServiceProcesses.model_fields["service_workers"].get_default()
    try:
        return ServiceProcesses(service_workers=raw).service_workers  # type: ignore[arg-type]
    except ValidationError as e:
        reason = e.errors()[0]["msg"]
        raise ValueError(f"{name}={raw!r}: {reason} (from 1 to {MAX_SERVICE_WORKERS} worker processes)") from e


def load_settings(**given: Any) -> Settings:
    """The settings from the environment now, any field `given` taking the place of its variable;
    a bad value is a start-up error (`SystemExit`) naming the variable and the reason."""
    try:
        s = Settings(**given)
    except ValidationError as e:
        problems = "; ".join(f"{variable(str(err['loc'][0]))}: {err['msg']}" for err in e.errors())
        raise SystemExit(f"invalid replenisher settings: {problems}") from e
    loaded: dict[str, object] = {}
    if s.calendar_file and "calendar" not in given:
        try:
            loaded["calendar"] = load_calendar(Path(s.calendar_file))
        except (OSError, ValueError) as e:
            raise SystemExit(f"invalid replenisher settings: REPLENISHER_CALENDAR_FILE: {e}") from e
    if s.door_key_file and "door_key" not in given:
        try:
            loaded["door_key"] = SecretBytes(load_door_key(Path(s.door_key_file)))
        except DoorKeyError as e:
            raise SystemExit(f"invalid replenisher settings: REPLENISHER_DOOR_KEY_FILE: {e}") from e
    if s.people_file and "people" not in given:
        try:
            loaded["people"] = load_authority(Path(s.people_file))
        except AuthorityFileError as e:
            raise SystemExit(f"invalid replenisher settings: REPLENISHER_PEOPLE_FILE: {e}") from e
    if s.personal_token_key_file and "personal_token_key" not in given:
        try:
            loaded["personal_token_key"] = SecretBytes(load_token_key(Path(s.personal_token_key_file)))
        except BadToken as e:
            raise SystemExit(f"invalid replenisher settings: REPLENISHER_PERSONAL_TOKEN_KEY_FILE: {e}") from e
    if "people" in loaded and "personal_token_key" not in loaded and given.get("personal_token_key") is None:
        raise SystemExit(
            "invalid replenisher settings: REPLENISHER_PEOPLE_FILE needs REPLENISHER_PERSONAL_TOKEN_KEY_FILE, the key "
            "personal tokens are checked with (make one: replenisher people new-token-key FILE)"
        )
    return s.model_copy(update=loaded) if loaded else s


AUDITED = (
    "decider",
    "claude_model",
    "claude_budget_usd",
    "claude_asks_per_turn",
    "claude_read_replies",
    "approval_reminders",
    "backup_approver",
    "approval_wait_days",
    "reply_wait_days",
    "goods_grace_days",
    "check_interval_days",
    "rest_after_failure_days",
    "day_seconds",
    "world_url",
    "calendar_file",
    "people_file",
    "door_key_file",
    "personal_token_key_file",
)
"""The settings an auditor asks about (how runs buy, who may approve, which files say so): never a
secret, only where one is kept."""


def audited_settings(s: Settings) -> dict[str, str]:
    """`AUDITED`, each as its variable and its value in words, for the deployment's record."""
    shown: dict[str, str] = {}
    for field in AUDITED:
        value = getattr(s, field)
        if isinstance(value, tuple):
            value = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) or "none"
        shown[variable(field)] = (
            "(unset)" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
        )
    return shown
