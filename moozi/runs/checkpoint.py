"""Checkpoints in a run directory: atomic to write, safe to load.

Layout::

    RUN/checkpoints/
        LATEST                      the name of the newest checkpoint, e.g. "ckpt-0000001000" (for
                                    people and tools; moozi loads the highest complete step)
        ckpt-0000001000/
            train_state.msgpack     the learner's TrainState pytree (flax msgpack)
            arrays.npz              a flat dict of numpy arrays (replay buffer, RNG keys, ...)
            meta.json               counters, game, versions, a fingerprint of the tree's shapes
        BEST                        the name of the best checkpoint by the in-training test
        best-0000000800/            its parameters (train_state.msgpack, an empty arrays.npz,
                                    meta.json with the test's score); `load_agent` plays it

Why these formats: the run directory is shared and may come from someone else,
so nothing in it is loaded with pickle. msgpack only ever yields dicts, lists,
numbers, strings and raw array buffers; `np.load(..., allow_pickle=False)`
refuses object arrays; JSON is JSON. A crafted file can therefore make a load
fail, never run code.

Why it survives a crash (even `kill -9`): a checkpoint is written into a
temporary sibling directory, every file and the directory are fsynced, and only
then is the directory renamed into place (a rename within one filesystem is
atomic). LATEST is replaced the same way. Older checkpoints are pruned only
after the new one is in place, so at every instant the last good checkpoint
exists on disk. Temporary directories left by a crash never match the
checkpoint name pattern, are ignored by `latest_checkpoint` and are removed by
the next `save_checkpoint`.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
import pathlib
import re
import shutil
import uuid
import zipfile
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from moozi._version import __version__
from moozi.errors import MooziError

CHECKPOINTS_DIR = "checkpoints"
LATEST_FILE = "LATEST"
BEST_FILE = "BEST"
TRAIN_STATE_FILE = "train_state.msgpack"
ARRAYS_FILE = "arrays.npz"
META_FILE = "meta.json"
# Bumped when the layout changes incompatibly; load refuses other versions.
FORMAT_VERSION = 1

# Keys `save_checkpoint` writes into meta.json itself (they override the caller's).
META_STEP = "step"
META_FORMAT = "format_version"
META_FINGERPRINT = "train_state_fingerprint"
META_MOOZI_VERSION = "moozi_version"
META_SAVED_AT = "saved_at"

_CKPT_RE = re.compile(r"^ckpt-(\d{10})$")
_BEST_RE = re.compile(r"^best-(\d{10})$")
# Temporary names start with a dot so that they can never match _CKPT_RE.
_TMP_PREFIX = ".tmp-"
_OLD_PREFIX = ".old-"


class CheckpointError(MooziError):
    """A checkpoint cannot be written or loaded (one line: which file, what went wrong)."""


# ---------------------------------------------------------------------------
# Fingerprint


def param_fingerprint(pytree: Any) -> str:
    """A sha256 hex digest over the sorted tree paths, leaf shapes and dtypes.

    Two trees get the same fingerprint exactly when they have the same
    structure and the same leaf shapes and dtypes, whatever their values; it
    tells a checkpoint of another network apart before any array is decoded.
    """
    lines = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(pytree)[0]:
        lines.append(f"{jax.tree_util.keystr(path)}:{tuple(np.shape(leaf))}:{_dtype_name(leaf)}")
    digest = hashlib.sha256()
    for line in sorted(lines):
        digest.update(line.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def _dtype_name(leaf: Any) -> str:
    dtype = getattr(leaf, "dtype", None)
    if dtype is None:
        dtype = np.asarray(leaf).dtype
    return np.dtype(dtype).name


# ---------------------------------------------------------------------------
# Saving


def save_checkpoint(
    run_dir: str | os.PathLike,
    step: int,
    *,
    train_state: Any,
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Any],
    keep: int = 3,
) -> pathlib.Path:
    """Writes checkpoint `step` atomically, points LATEST at it and keeps the newest `keep`.

    `meta` must be JSON-serializable (no NaN); the keys `step`,
    `format_version`, `train_state_fingerprint`, `moozi_version` and
    `saved_at` are filled in here. Returns the checkpoint directory.
    Raises CheckpointError if anything cannot be written; the previous
    checkpoints are then untouched.
    """
    step = _check_step(step)
    if keep < 1:
        raise CheckpointError(f"keep must be at least 1 (the checkpoint just written), got {keep}")

    # Encode everything in memory first: a bad input then fails before any disk work.
    state_bytes = _encode_train_state(train_state)
    checked_arrays = _check_arrays(arrays)
    meta_bytes = _encode_meta(meta, step=step, train_state=train_state)

    ckpt_root = pathlib.Path(run_dir) / CHECKPOINTS_DIR
    final = ckpt_root / _ckpt_name(step)
    _write_checkpoint_dir(ckpt_root, final, state_bytes, checked_arrays, meta_bytes, pointer=LATEST_FILE)

    try:
        _prune(ckpt_root, keep=keep, protect=final.name)
    except OSError as e:
        raise CheckpointError(
            f"checkpoint {final} was written, but old checkpoints in {ckpt_root} could not be removed: {_os_reason(e)}"
        ) from e
    return final


def _write_checkpoint_dir(ckpt_root: pathlib.Path, final: pathlib.Path, state_bytes: bytes,
                          arrays: Mapping[str, np.ndarray], meta_bytes: bytes, *, pointer: str) -> None:
    """Writes `final` through a fsynced temporary sibling and a rename, then the pointer file."""
    tmp = ckpt_root / f"{_TMP_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}"
    try:
        ckpt_root.mkdir(parents=True, exist_ok=True)
        _remove_leftovers(ckpt_root)
        tmp.mkdir()
        _write_file(tmp / TRAIN_STATE_FILE, state_bytes)
        with open(tmp / ARRAYS_FILE, "wb") as f:
            np.savez(f, allow_pickle=False, **arrays)
            f.flush()
            os.fsync(f.fileno())
        # meta.json last: a directory whose meta.json parses was written to the end.
        _write_file(tmp / META_FILE, meta_bytes)
        _fsync_dir(tmp)
        _move_into_place(tmp, final)
        _fsync_dir(ckpt_root)
        _write_pointer(ckpt_root, pointer, final.name)
    except OSError as e:
        raise CheckpointError(f"cannot write checkpoint {final}: {_os_reason(e)}") from e
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def save_best_checkpoint(
    run_dir: str | os.PathLike, step: int, *, train_state: Any, meta: Mapping[str, Any]
) -> pathlib.Path:
    """Writes the parameters of update `step` as the run's best checkpoint, `best-<step>`.

    The caller decides what "best" means (the driver: the in-training test's score, stored in
    `meta`). Written like `save_checkpoint` (temporary directory, fsync, rename), then BEST is
    pointed at it, and only then are older best checkpoints removed: a crash at any moment
    leaves a complete best checkpoint. No replay buffer or worker state: it is for playing,
    not for resuming.
    """
    step = _check_step(step)
    state_bytes = _encode_train_state(train_state)
    meta_bytes = _encode_meta(meta, step=step, train_state=train_state)
    ckpt_root = pathlib.Path(run_dir) / CHECKPOINTS_DIR
    final = ckpt_root / f"best-{step:010d}"
    _write_checkpoint_dir(ckpt_root, final, state_bytes, {}, meta_bytes, pointer=BEST_FILE)
    try:
        _prune(ckpt_root, keep=1, protect=final.name, pattern=_BEST_RE)
    except OSError as e:
        raise CheckpointError(f"best checkpoint {final} was written, but older ones could not be removed: {_os_reason(e)}") from e
    return final


def _check_step(step: Any) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise CheckpointError(f"checkpoint step must be a non-negative integer, got {step!r}")
    return int(step)


def _ckpt_name(step: int) -> str:
    return f"ckpt-{step:010d}"


def _encode_train_state(train_state: Any) -> bytes:
    try:
        return serialization.to_bytes(train_state)
    except Exception as e:  # msgpack raises TypeError/ValueError/OverflowError for unsupported leaves.
        raise CheckpointError(f"train_state cannot be serialized to msgpack: {_one_line(e)}") from e


def _check_arrays(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for key, value in arrays.items():
        if not isinstance(key, str) or not key:
            raise CheckpointError(f"array names must be non-empty strings, got {key!r}")
        array = np.asarray(value)
        if array.dtype.hasobject:
            # Object arrays can only be stored with pickle, which this format never uses.
            raise CheckpointError(f"array {key!r} has dtype object, which cannot be stored without pickle")
        out[key] = array
    return out


def _encode_meta(meta: Mapping[str, Any], *, step: int, train_state: Any) -> bytes:
    full = dict(meta)
    full[META_STEP] = step
    full[META_FORMAT] = FORMAT_VERSION
    full[META_FINGERPRINT] = param_fingerprint(train_state)
    full[META_MOOZI_VERSION] = __version__
    full[META_SAVED_AT] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        text = json.dumps(full, indent=2, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint meta is not plain JSON (numbers, strings, lists, dicts; no NaN): {e}") from e
    return (text + "\n").encode("utf-8")


def _write_file(path: pathlib.Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: pathlib.Path) -> None:
    """Makes a rename or a new entry in `path` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # Some filesystems refuse fsync on directories; the rename is still atomic.
    finally:
        os.close(fd)


def _move_into_place(tmp: pathlib.Path, final: pathlib.Path) -> None:
    if final.exists():
        # Re-saving a step (e.g. after a resume): set the old one aside first, since
        # rename cannot replace a non-empty directory. For a moment the step is missing;
        # latest_checkpoint then finds the newest other complete checkpoint.
        old = final.parent / f"{_OLD_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}"
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, final)


def _write_pointer(ckpt_root: pathlib.Path, pointer: str, name: str) -> None:
    tmp = ckpt_root / f"{_TMP_PREFIX}{pointer}-{uuid.uuid4().hex[:8]}"
    try:
        _write_file(tmp, (name + "\n").encode("ascii"))
        os.replace(tmp, ckpt_root / pointer)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(ckpt_root)


def _remove_leftovers(ckpt_root: pathlib.Path) -> None:
    """Deletes temporary files and directories left by a crashed save (one writer per run)."""
    for entry in ckpt_root.iterdir():
        if entry.name.startswith((_TMP_PREFIX, _OLD_PREFIX)):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def _prune(ckpt_root: pathlib.Path, *, keep: int, protect: str, pattern: re.Pattern = _CKPT_RE) -> None:
    steps = sorted(_checkpoint_dirs(ckpt_root, pattern), key=lambda p: _step_of(p, pattern))
    doomed = [p for p in steps[:-keep] if p.name != protect]
    for path in doomed:
        # Rename first so that a crash mid-delete leaves a temp name, not a half checkpoint.
        trash = ckpt_root / f"{_OLD_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}"
        os.rename(path, trash)
        shutil.rmtree(trash)


def _os_reason(e: OSError) -> str:
    reason = e.strerror or str(e)
    where = e.filename if e.filename is not None else None
    return f"{reason} ({where})" if where else reason


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    text = text or type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."


# ---------------------------------------------------------------------------
# Finding


def latest_checkpoint(run_dir: str | os.PathLike) -> pathlib.Path | None:
    """The newest complete checkpoint of the run (the highest complete step), or None if there is none.

    LATEST is not consulted: a kill between renaming a new checkpoint into
    place and rewriting LATEST leaves LATEST one checkpoint behind, and
    trusting it would throw away a whole checkpoint interval of work
    (tests/training/test_reliability.py::test_kill_9_at_seven_moments_then_resume).
    """
    ckpt_root = pathlib.Path(run_dir) / CHECKPOINTS_DIR
    if not ckpt_root.is_dir():
        return None
    complete = [p for p in _checkpoint_dirs(ckpt_root) if _is_complete(p)]
    return max(complete, key=_step_of) if complete else None


def best_checkpoint(run_dir: str | os.PathLike) -> pathlib.Path | None:
    """The run's best checkpoint (`save_best_checkpoint`), or None if it has none.

    As with LATEST, the BEST file is not consulted: each best checkpoint replaces the one
    before (the driver decides when), so the highest complete `best-*` is the current one
    even when a crash came between its rename and the rewrite of BEST.
    """
    ckpt_root = pathlib.Path(run_dir) / CHECKPOINTS_DIR
    if not ckpt_root.is_dir():
        return None
    complete = [p for p in _checkpoint_dirs(ckpt_root, _BEST_RE) if _is_complete(p)]
    return max(complete, key=lambda p: _step_of(p, _BEST_RE)) if complete else None


def complete_checkpoints(run_dir: str | os.PathLike) -> list[pathlib.Path]:
    """Every complete checkpoint of the run, oldest (lowest step) first; [] if there is none."""
    ckpt_root = pathlib.Path(run_dir) / CHECKPOINTS_DIR
    if not ckpt_root.is_dir():
        return []
    return sorted((p for p in _checkpoint_dirs(ckpt_root) if _is_complete(p)), key=_step_of)


def _checkpoint_dirs(ckpt_root: pathlib.Path, pattern: re.Pattern = _CKPT_RE) -> list[pathlib.Path]:
    return [p for p in ckpt_root.iterdir() if pattern.match(p.name) and p.is_dir()]


def _step_of(path: pathlib.Path, pattern: re.Pattern = _CKPT_RE) -> int:
    return int(pattern.match(path.name).group(1))


def _is_complete(path: pathlib.Path) -> bool:
    if not all((path / f).is_file() for f in (TRAIN_STATE_FILE, ARRAYS_FILE, META_FILE)):
        return False
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and META_FINGERPRINT in meta


# ---------------------------------------------------------------------------
# Loading


def load_checkpoint(
    path: str | os.PathLike,
    *,
    train_state_template: Any,
    expected_meta: Mapping[str, Any] | None = None,
) -> tuple[Any, dict[str, np.ndarray], dict[str, Any]]:
    """Loads (train_state, arrays, meta) from a checkpoint directory.

    `train_state_template` is a TrainState of the current config (values are
    ignored; structure, shapes and dtypes must match). Every key of
    `expected_meta` (e.g. {"game": "tic_tac_toe"}) must equal the stored
    value. Any mismatch or damaged file raises CheckpointError naming the
    file; nothing stored in the checkpoint is ever executed.
    """
    path = pathlib.Path(path)
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint directory at {path}")
    meta = _load_meta(path / META_FILE, expected_meta)
    train_state = _load_train_state(path / TRAIN_STATE_FILE, train_state_template, meta)
    arrays = _load_arrays(path / ARRAYS_FILE)
    return train_state, arrays, meta


def _load_meta(file: pathlib.Path, expected: Mapping[str, Any] | None) -> dict[str, Any]:
    try:
        meta = json.loads(file.read_bytes().decode("utf-8"))
    except OSError as e:
        raise CheckpointError(f"cannot read {file}: {e.strerror or e}") from e
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors.
        raise CheckpointError(f"{file} is not valid JSON (truncated or damaged?): {_one_line(e)}") from e
    if not isinstance(meta, dict):
        raise CheckpointError(f"{file} does not hold a JSON object")
    if meta.get(META_FORMAT) != FORMAT_VERSION:
        raise CheckpointError(
            f"{file} has checkpoint format {meta.get(META_FORMAT)!r}; this moozi reads format {FORMAT_VERSION}"
        )
    for key, want in (expected or {}).items():
        if key not in meta:
            raise CheckpointError(f"{file} has no {key!r}; expected {want!r}")
        if meta[key] != want:
            raise CheckpointError(f"{file} is for {key} {meta[key]!r}, but this run expects {key} {want!r}")
    return meta


def _load_train_state(file: pathlib.Path, template: Any, meta: Mapping[str, Any]) -> Any:
    try:
        data = file.read_bytes()
    except OSError as e:
        raise CheckpointError(f"cannot read {file}: {e.strerror or e}") from e
    try:
        # msgpack decodes to dicts, lists, scalars and raw array buffers only;
        # no byte of the file can make it import or call anything.
        restored = serialization.msgpack_restore(data)
    except Exception as e:  # Damaged bytes surface as many msgpack/numpy error types.
        raise CheckpointError(f"{file} is not a valid msgpack train state (truncated or damaged?): {_one_line(e)}") from e

    expected = serialization.to_state_dict(template)
    difference = _first_difference(expected, restored, "")
    if difference is not None:
        raise CheckpointError(f"{file} was saved for a different network or optimizer: {difference}")
    if meta.get(META_FINGERPRINT) != param_fingerprint(template):
        # The arrays match but meta disagrees: the directory was mixed up or edited.
        raise CheckpointError(f"{file} does not match the fingerprint in {file.parent / META_FILE}")
    try:
        state = serialization.from_state_dict(template, restored)
    except Exception as e:  # Structure was checked above; this guards odd custom state-dict types.
        raise CheckpointError(f"{file} does not fit the train state template: {_one_line(e)}") from e
    # Leaves come back as read-only numpy views of the file's bytes; give jax leaves back as jax arrays.
    return jax.tree_util.tree_map(
        lambda t, r: jnp.asarray(r) if isinstance(t, jax.Array) else r, template, state
    )


def _first_difference(expected: Any, got: Any, where: str) -> str | None:
    """Describes the first place where the restored state dict differs from the template's, or None."""
    label = where or "<root>"
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"{label}: expected a mapping, found {type(got).__name__}"
        missing = sorted(map(str, set(map(str, expected)) - set(map(str, got))))
        extra = sorted(map(str, set(map(str, got)) - set(map(str, expected))))
        if missing:
            return f"{label}: missing {', '.join(missing[:3])}"
        if extra:
            return f"{label}: unexpected {', '.join(extra[:3])}"
        for key in expected:
            diff = _first_difference(expected[key], got[str(key)], f"{where}/{key}")
            if diff is not None:
                return diff
        return None
    if expected is None or got is None:
        return None if expected is got else f"{label}: expected {expected!r}, found {type(got).__name__}"
    if not isinstance(got, (np.ndarray, np.generic, int, float, complex)):
        return f"{label}: expected an array, found {type(got).__name__}"
    want_shape, got_shape = tuple(np.shape(expected)), tuple(np.shape(got))
    if want_shape != got_shape:
        return f"{label}: shape {got_shape} in file, {want_shape} expected"
    want_dtype, got_dtype = _dtype_name(expected), _dtype_name(got)
    if want_dtype != got_dtype:
        return f"{label}: dtype {got_dtype} in file, {want_dtype} expected"
    return None


def load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The arrays of a checkpoint directory alone (its replay, RNG keys, ...), checked as
    `load_checkpoint` checks them; for readers that need no train state."""
    return _load_arrays(pathlib.Path(path) / ARRAYS_FILE)


def _load_arrays(file: pathlib.Path) -> dict[str, np.ndarray]:
    try:
        data = file.read_bytes()
    except OSError as e:
        raise CheckpointError(f"cannot read {file}: {e.strerror or e}") from e
    try:
        # allow_pickle=False: an object array or a pickle posing as .npz raises instead of running code.
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise _npz_error(file, e) from e
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise CheckpointError(f"{file} is a single .npy array, not an .npz archive")
    try:
        with loaded:
            return {key: loaded[key] for key in loaded.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        # Members are decoded lazily: object arrays and CRC errors show up here.
        raise _npz_error(file, e) from e


def _npz_error(file: pathlib.Path, e: BaseException) -> CheckpointError:
    if "pickle" in str(e).lower() or "object arrays" in str(e).lower():
        # numpy's own message suggests loading unsafely; a run directory must never need that.
        return CheckpointError(f"{file} holds pickled or object data, which moozi never loads")
    return CheckpointError(f"{file} is not a valid .npz archive (truncated or damaged?): {_one_line(e)}")
