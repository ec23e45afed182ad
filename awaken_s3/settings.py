"""The environment the functions read, parsed once, by pydantic-settings.

One model per concern, each a :class:`EnvSettings`: :class:`StorageSettings` (here: where
the durable records live), ``WorkerSettings``, ``SweeperSettings`` and ``ApiSettings``
(:mod:`awaken_s3.service.config`), ``ProviderSettings`` (:mod:`awaken_s3.providers.config`).
Each field names its variable; an empty variable counts as unset; a bad value is one
:class:`SettingsError` naming the variable and what it must be.

Storage: ``AWAKEN_BUCKET`` (checkpoints and offloaded message bodies), ``AWAKEN_TABLE``
(threads and runs), ``AWAKEN_QUEUE_URL`` (continuations) and the optional
``AWAKEN_CHECKPOINT_PREFIX`` and ``AWAKEN_SWEEP_GRACE_SECONDS`` (how far past its due time
an undriven run's ``sweep_at`` is set: every writer of the table must agree on it; by
default it is derived from ``AWAKEN_LEASE_SECONDS`` and ``AWAKEN_VISIBILITY_MARGIN_SECONDS``,
which every function of a deployment shares).
Endpoints are botocore's business (``AWS_ENDPOINT_URL``): there is no endpoint setting here.

Importing this module loads pydantic-settings: the handlers import it on their first
invocation, not at their own import (their cold start is measured in docs/PERFORMANCE.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Final, Self

from pydantic import AliasChoices, BeforeValidator, Field, ValidationError
from pydantic_core import PydanticCustomError, PydanticUndefined
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from awaken_s3.errors import AwakenError

# Defined with the error root, so that code run at a handler module's import can raise it
# without loading pydantic-settings; importing it from here works as it always did.
from awaken_s3.errors import SettingsError as SettingsError

DEFAULT_CHECKPOINT_PREFIX = "checkpoints/"
#: the run lease: how long a worker that dies without answering blocks its run
DEFAULT_LEASE_SECONDS: Final = 60.0
#: a worker keeps the record it works on hidden this much longer than its lease
DEFAULT_VISIBILITY_MARGIN: Final = 10.0


def derived_sweep_grace(lease_seconds: float, visibility_margin: float) -> float:
    """How long past the moment a run should next have been driven the sweeper waits before
    it re-sends the run (pure).

    A dead worker's own record comes back ``visibility_margin`` after its lease ran out, and
    its next delivery claims the run a receive, a cold start and one write later; a third of
    a lease more covers that (20 s with the defaults: Lambda's init is limited to 10 s), so
    the queue, not the sweeper, resumes crashes. Any longer only delays what the queue lost
    (a dead-lettered record, a lost continuation): the sweeper re-sends those at its first
    pass after the grace, which keeps them within three lease periods of the crash
    (docs/THREADS.md, "Recovery paths").
    """
    return visibility_margin + lease_seconds / 3


DEFAULT_SWEEP_GRACE: Final = derived_sweep_grace(DEFAULT_LEASE_SECONDS, DEFAULT_VISIBILITY_MARGIN)


def _refuse(must: str, raw: Any) -> PydanticCustomError:
    return PydanticCustomError(
        "setting", "must be {must}, got {got}", {"must": must, "got": repr(raw)}
    )


def _seconds(raw: Any, *, zero: bool) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if not (value > 0 or (zero and value == 0)):  # also NaN
        raise _refuse("a number of seconds >= 0" if zero else "a positive number of seconds", raw)
    return value


def _count(raw: Any) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise _refuse("a whole number", raw) from None
    if value < 1:
        raise PydanticCustomError("setting", "must be at least 1, got {got}", {"got": repr(raw)})
    return value


def _positive(raw: Any) -> float:
    return _seconds(raw, zero=False)


def _positive_or_unset(raw: Any) -> float | None:
    return None if raw is None else _seconds(raw, zero=False)


def _positive_or_zero(raw: Any) -> float:
    return _seconds(raw, zero=True)


#: a positive number of seconds
Seconds = Annotated[float, BeforeValidator(_positive)]
#: a number of seconds, 0 allowed
SecondsOrZero = Annotated[float, BeforeValidator(_positive_or_zero)]
#: a whole number, at least 1
Count = Annotated[int, BeforeValidator(_count)]


def env(
    name: str,
    default: Any = PydanticUndefined,
    *,
    alias_choices: tuple[str, ...] = (),
    **kwargs: Any,
) -> Any:
    """A field read from the environment variable ``name`` (else the first of
    ``alias_choices`` that is set)."""
    alias: str | AliasChoices = AliasChoices(name, *alias_choices) if alias_choices else name
    return Field(default, validation_alias=alias, **kwargs)


class _Variables(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (``os.environ`` unless a
    caller passes its own), empty variables left out as unset."""

    def __init__(self, settings_cls: type[BaseSettings], variables: Mapping[str, str]) -> None:
        self._variables = {name: value for name, value in variables.items() if value}
        super().__init__(settings_cls, case_sensitive=True)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._variables


class EnvSettings(BaseSettings):
    """Settings of one concern, read from the environment by :meth:`from_env`; built
    directly, a model takes its values as given (the environment is not read)."""

    model_config = SettingsConfigDict(
        case_sensitive=True, frozen=True, extra="forbid", populate_by_name=True
    )
    #: what a bad value raises
    error: ClassVar[type[AwakenError]] = SettingsError

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only what the caller passes: from_env reads the environment it is given, and a
        # model built directly takes its values as given.
        return (init_settings,)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """The settings in ``environ`` (default: ``os.environ``)."""
        values = _Variables(cls, os.environ if environ is None else environ)()
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise cls.error(_first_problem(exc)) from None


def _first_problem(exc: ValidationError) -> str:
    problem = exc.errors(include_url=False)[0]
    where = problem["loc"][0] if problem["loc"] else ""
    return f"{where} {problem['msg']}".strip()


def _checkpoint_prefix(raw: Any) -> str:
    # A prefix is a key *directory*: without the slash, "checkpoints" would also list
    # "checkpoints-old/...", and keys would read "checkpointsrun-1.json".
    prefix = str(raw)
    if prefix and not prefix.endswith("/"):
        raise PydanticCustomError("setting", "must end with '/', got {got}", {"got": repr(prefix)})
    return prefix


class StorageSettings(EnvSettings):
    bucket: str = env("AWAKEN_BUCKET")
    table: str = env("AWAKEN_TABLE", "")
    queue_url: str | None = env("AWAKEN_QUEUE_URL", None)
    checkpoint_prefix: Annotated[str, BeforeValidator(_checkpoint_prefix)] = env(
        "AWAKEN_CHECKPOINT_PREFIX", DEFAULT_CHECKPOINT_PREFIX
    )
    #: ``AWAKEN_SWEEP_GRACE_SECONDS`` as set (None: derived, see :attr:`sweep_grace`)
    configured_grace: Annotated[float | None, BeforeValidator(_positive_or_unset)] = env(
        "AWAKEN_SWEEP_GRACE_SECONDS", None
    )
    lease_seconds: Seconds = env("AWAKEN_LEASE_SECONDS", DEFAULT_LEASE_SECONDS)
    visibility_margin: Seconds = env("AWAKEN_VISIBILITY_MARGIN_SECONDS", DEFAULT_VISIBILITY_MARGIN)

    @property
    def sweep_grace(self) -> float:
        """The grace every writer of the table sets ``sweep_at`` with: as configured, else
        derived from the lease and the visibility margin (:func:`derived_sweep_grace`)."""
        if self.configured_grace is not None:
            return self.configured_grace
        return derived_sweep_grace(self.lease_seconds, self.visibility_margin)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        need_queue: bool = False,
        need_table: bool = True,
    ) -> Self:
        """``need_table=False``: for checkpoint-only work; ``table`` is then "" when unset."""
        variables = os.environ if environ is None else environ
        required = ("AWAKEN_BUCKET", "AWAKEN_TABLE") if need_table else ("AWAKEN_BUCKET",)
        missing = [name for name in required if not variables.get(name)]
        if need_queue and not variables.get("AWAKEN_QUEUE_URL"):
            missing.append("AWAKEN_QUEUE_URL")
        if missing:
            raise SettingsError(f"set {', '.join(missing)} in the environment")
        return super().from_env(variables)
