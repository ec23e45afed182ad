"""What S3 answers mean for a stream checkpoint: pure functions, no I/O.

The S3 store is a thin shell around these decisions, so every mapping from a
status or error code to "fenced", "absent", "retry" or "fail" is unit-tested
without a server. Inputs are botocore's parsed error response dicts
(``ClientError.response``), which look the same from boto3 and aiobotocore.

Backends disagree on one point that matters for fencing: a conditional
request against a missing key. AWS and moto answer 404 ``NoSuchKey``;
SeaweedFS answers 412 ``PreconditionFailed``. Both mean the writer lost.

Key layout: ``<prefix><shard>/<run_id>.json``, the shard being the first two hex digits of
sha256(run_id), so that writes spread over 256 prefixes S3 can partition. Builds before it
wrote ``<prefix><run_id>.json``; such a legacy checkpoint is read when the sharded key is
absent, and keeps being written at its legacy key (its version says so) until its turn ends.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from awaken_s3.ids import InvalidIdError, validate_run_id

CONTENT_TYPE: Final = "application/json"
KEY_SUFFIX: Final = ".json"

# S3 error codes that name a missing object. HEAD responses carry no body, so
# botocore reports their code as the bare status ("404").
_NOT_FOUND_CODES: Final = frozenset({"NoSuchKey", "NotFound", "404"})
_PRECONDITION_CODES: Final = frozenset({"PreconditionFailed", "412"})
_CONFLICT_CODE: Final = "ConditionalRequestConflict"


class S3ErrorKind(enum.Enum):
    PRECONDITION_FAILED = "precondition_failed"
    NO_SUCH_KEY = "no_such_key"
    CONFLICT = "conflict"
    OTHER = "other"


class Action(enum.Enum):
    """What the store does with a failed request."""

    FENCED = "fenced"  # raise CheckpointFenced
    ABSENT = "absent"  # the object is not there: None for get, done for delete
    RETRY = "retry"  # send the same conditional request again after a backoff
    PROBE = "probe"  # ambiguous 412 on delete: look whether the object still exists
    FAIL = "fail"  # raise StreamCheckpointError with the cause attached


def error_code(response: Mapping[str, Any]) -> str:
    error = response.get("Error")
    if isinstance(error, Mapping):
        code = error.get("Code")
        if code is not None:
            return str(code)
    return ""


def http_status(response: Mapping[str, Any]) -> int | None:
    meta = response.get("ResponseMetadata")
    if isinstance(meta, Mapping):
        status = meta.get("HTTPStatusCode")
        if isinstance(status, int):
            return status
    return None


def classify_error(response: Mapping[str, Any]) -> S3ErrorKind:
    """Sort an S3 error response into the few kinds the store distinguishes."""
    code = error_code(response)
    status = http_status(response)
    if code in _PRECONDITION_CODES or (status == 412 and not code):
        return S3ErrorKind.PRECONDITION_FAILED
    if code == _CONFLICT_CODE:
        return S3ErrorKind.CONFLICT
    # NoSuchBucket is also a 404, and must never read as "no checkpoint".
    if code in _NOT_FOUND_CODES or (status == 404 and not code):
        return S3ErrorKind.NO_SUCH_KEY
    return S3ErrorKind.OTHER


def put_action(response: Mapping[str, Any], *, replacing: bool) -> Action:
    """Decide the fate of a failed conditional PutObject.

    ``replacing`` is True for ``If-Match`` (replace), False for
    ``If-None-Match: *`` (create).
    """
    kind = classify_error(response)
    if kind is S3ErrorKind.PRECONDITION_FAILED:
        return Action.FENCED
    if kind is S3ErrorKind.NO_SUCH_KEY and replacing:
        # AWS/moto: If-Match on a key someone deleted.
        return Action.FENCED
    if kind is S3ErrorKind.CONFLICT:
        return Action.RETRY
    return Action.FAIL


def was_retried(response: Mapping[str, Any]) -> bool:
    """Whether botocore sent this request more than once.

    An earlier attempt may then have been applied with its answer lost, so
    a 412 on the final attempt can be the writer's own write, not a rival's.
    """
    meta = response.get("ResponseMetadata")
    if not isinstance(meta, Mapping):
        return False
    attempts = meta.get("RetryAttempts")
    return isinstance(attempts, int) and attempts > 0


def get_action(response: Mapping[str, Any]) -> Action:
    """A failed GetObject. S3 answers a GET with an error body, so only ``NoSuchKey`` means
    "no checkpoint": a bare 404 (no code; botocore then reports the status as the code) comes
    from something that is not S3 (a wrong endpoint, a proxy), and must not read as absence."""
    if error_code(response) == "NoSuchKey":
        return Action.ABSENT
    return Action.FAIL


def head_action(response: Mapping[str, Any]) -> Action:
    """A failed HeadObject: HEAD answers carry no body, so a missing key is the bare 404."""
    if classify_error(response) is S3ErrorKind.NO_SUCH_KEY:
        return Action.ABSENT
    return Action.FAIL


def delete_action(response: Mapping[str, Any], *, conditional: bool) -> Action:
    """Decide the fate of a failed DeleteObject.

    Delete is idempotent: a missing object is success, conditional or not.
    A 412 on a conditional delete is ambiguous (stale version on every backend,
    or missing key on SeaweedFS), so the store probes before calling it fenced.
    """
    kind = classify_error(response)
    if kind is S3ErrorKind.NO_SUCH_KEY:
        return Action.ABSENT
    if kind is S3ErrorKind.PRECONDITION_FAILED and conditional:
        return Action.PROBE
    if kind is S3ErrorKind.CONFLICT:
        return Action.RETRY
    return Action.FAIL


def probe_action(*, exists: bool) -> Action:
    """Resolve an ambiguous delete 412 from whether the object still exists."""
    return Action.FENCED if exists else Action.ABSENT


def backoff_delay(attempt: int, *, base: float, cap: float, jitter: float) -> float:
    """Delay before retry number ``attempt`` (0-based): capped exponential, full jitter.

    ``jitter`` is a number in [0, 1) supplied by the caller, so this stays pure.
    Full jitter spreads writers that collided at the same instant.
    """
    if attempt < 0:
        raise ValueError("attempt must be >= 0")
    if not 0.0 <= jitter <= 1.0:
        raise ValueError("jitter must be within [0, 1]")
    return min(cap, base * (2.0**attempt)) * jitter


#: hex digits of sha256(run_id) that name a checkpoint's shard: 2 give 256 prefixes. S3 scales
#: request rates per partitioned key prefix (about 3,500 PUT/s each), so 256 hashed prefixes
#: let one bucket absorb about 900,000 checkpoint PUT/s once S3 has split them, far past
#: every other limit of a deployment (docs/SCALING.md); more digits would only make a full
#: listing cost more requests.
SHARD_HEX_DIGITS: Final = 2
#: marks a version read from a checkpoint's legacy (flat, pre-shard) key, so that a put or
#: delete with it goes back to that key (see :func:`legacy_version`)
LEGACY_VERSION_TAG: Final = "legacy:"


def shard_of(run_id: str) -> str:
    """The shard a run's checkpoint lives in: the first hex digits of sha256(run_id)."""
    digest = hashlib.sha256(validate_run_id(run_id).encode("utf-8")).hexdigest()
    return digest[:SHARD_HEX_DIGITS]


def shard_prefixes(prefix: str) -> list[str]:
    """Every shard's key prefix, in order: what a sharded listing walks."""
    width = SHARD_HEX_DIGITS
    return [f"{prefix}{n:0{width}x}/" for n in range(16**width)]


def object_key(prefix: str, run_id: str) -> str:
    """The checkpoint's object key, ``<prefix><shard>/<run_id>.json``, derived only from a
    validated run id."""
    return f"{prefix}{shard_of(run_id)}/{run_id}{KEY_SUFFIX}"


def legacy_key(prefix: str, run_id: str) -> str:
    """Where a build before the sharded layout kept the checkpoint: ``<prefix><run_id>.json``.
    Read when the sharded key is absent, so an upgrade strands no run in flight."""
    return f"{prefix}{validate_run_id(run_id)}{KEY_SUFFIX}"


def run_id_from_key(prefix: str, key: str) -> str | None:
    """The run id a listed key names (either layout), or None for any object that is not a
    checkpoint's. A key in a shard that is not its run's is not ours: no get would read it."""
    if not key.startswith(prefix) or not key.endswith(KEY_SUFFIX):
        return None
    name = key[len(prefix) : len(key) - len(KEY_SUFFIX)]
    shard, slash, rest = name.partition("/")
    candidate = rest if slash else name
    try:
        run_id = validate_run_id(candidate)
    except InvalidIdError:
        return None
    if slash and shard != shard_of(run_id):
        return None
    return run_id


def is_legacy_version(version: str) -> bool:
    return version.removeprefix('"').startswith(LEGACY_VERSION_TAG)


def legacy_version(etag: str) -> str:
    """The version token of an object read at the legacy key: the ETag with the tag inside
    its quotes (``"legacy:<hex>"``), so that it still reads as one quoted token wherever a
    version is shown or hashed. An S3 ETag is hex digits (and a dash), never the tag."""
    if etag.startswith('"'):
        return f'"{LEGACY_VERSION_TAG}{etag[1:]}'
    return f"{LEGACY_VERSION_TAG}{etag}"


def etag_of(version: str) -> str:
    """The ETag a version token stands for (a legacy one without its tag)."""
    if version.startswith(f'"{LEGACY_VERSION_TAG}'):
        return '"' + version[len(LEGACY_VERSION_TAG) + 1 :]
    return version.removeprefix(LEGACY_VERSION_TAG)


@dataclass(frozen=True, slots=True)
class Target:
    """Where one conditional request goes: the key, and the ETag it is conditional on."""

    key: str
    etag: str | None
    legacy: bool


def write_target(prefix: str, run_id: str, expected_version: str | None) -> Target:
    """Where a put or a conditional delete goes. A version read at the legacy key stays
    there: the checkpoint keeps its one chain of conditional writes (the one an older build's
    writer of the same run is fenced on) until it is deleted at the end of its turn; every
    new checkpoint is created at the sharded key."""
    if expected_version is not None and is_legacy_version(expected_version):
        return Target(legacy_key(prefix, run_id), etag_of(expected_version), legacy=True)
    return Target(object_key(prefix, run_id), expected_version, legacy=False)


def delete_targets(prefix: str, run_id: str, expected_version: str | None) -> list[Target]:
    """The deletes that remove a run's checkpoint, in order. Conditional on
    ``expected_version`` at the key it was read from; without a version, both layouts go
    unconditionally (no deployed caller does that: the bucket policy refuses it).

    A delete at a legacy version touches only the legacy key: a sharded object created since
    belongs to a newer turn or owner. After a delete at a sharded version, see
    :func:`legacy_leftover`.
    """
    first = write_target(prefix, run_id, expected_version)
    if expected_version is None:
        return [first, Target(legacy_key(prefix, run_id), None, legacy=True)]
    return [first]


def legacy_leftover(prefix: str, run_id: str, expected_version: str | None) -> str | None:
    """The legacy key to clear after a conditional delete of the sharded checkpoint, at the
    ETag a HEAD finds there (the bucket policy refuses a delete without ``If-Match``).

    A legacy object beside a sharded checkpoint is always older (the leftover of a turn whose
    delete was lost, or of an older build's zombie that created it after the run moved on),
    and the caller has just proved it held the run's current checkpoint. If it is rewritten
    between the HEAD and the delete, it stays for the sweeper, which lists both layouts.
    """
    if expected_version is None or is_legacy_version(expected_version):
        return None
    return legacy_key(prefix, run_id)


def tag_version(target: Target, etag: str) -> str:
    """The version token a write at ``target`` returns."""
    return legacy_version(etag) if target.legacy else etag


def put_params(
    *,
    bucket: str,
    key: str,
    body: bytes,
    expected_version: str | None,
    kms_key_id: str | None,
) -> dict[str, Any]:
    """The keyword arguments of one conditional PutObject."""
    params: dict[str, Any] = {
        "Bucket": bucket,
        "Key": key,
        "Body": body,
        "ContentType": CONTENT_TYPE,
    }
    if expected_version is None:
        params["IfNoneMatch"] = "*"
    else:
        params["IfMatch"] = expected_version
    if kms_key_id is not None:
        params["ServerSideEncryption"] = "aws:kms"
        params["SSEKMSKeyId"] = kms_key_id
    return params


def delete_params(*, bucket: str, key: str, expected_version: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"Bucket": bucket, "Key": key}
    if expected_version is not None:
        params["IfMatch"] = expected_version
    return params


def describe(response: Mapping[str, Any]) -> str:
    """A short human description of an error response for exception messages."""
    code = error_code(response) or "unknown error"
    status = http_status(response)
    return f"{code} (HTTP {status})" if status is not None else code
