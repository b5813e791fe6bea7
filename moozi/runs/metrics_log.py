"""The metrics log of a run: `RUN/metrics.jsonl` plus TensorBoard scalars in `RUN/`.

One JSON object per line: `step`, `time` (wall seconds of training, carried
over across resumes), `role` when given (e.g. "train", "test", "learner"), then
the metrics. Non-finite floats are written as the strings "NaN", "Infinity"
and "-Infinity" so that every line is strict JSON; `read_metrics` turns them
back into floats.

Resuming from a checkpoint at step S drops every line with step > S first (the
file is rewritten atomically), and TensorBoard is told to purge events after S,
so a resumed run's log equals an uninterrupted one's.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import time
from typing import Any, Mapping

import numpy as np
from tensorboardX import SummaryWriter

from moozi.errors import MooziError

METRICS_FILE = "metrics.jsonl"
RESERVED_KEYS = ("step", "time", "role")

_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class MetricsLogError(MooziError):
    """metrics.jsonl cannot be read, repaired or written (the message says where and why)."""


class MetricsLogger:
    """Appends metrics to `RUN/metrics.jsonl` and to TensorBoard event files in `RUN/`."""

    def __init__(self, run_dir: str | os.PathLike, *, resume_from_step: int | None = None):
        self._run_dir = pathlib.Path(run_dir)
        self._path = self._run_dir / METRICS_FILE
        try:
            self._run_dir.mkdir(parents=True, exist_ok=True)
            kept = _repair(self._path, resume_from_step)
            # Continue the wall clock where the kept log ends, so `time` stays monotone.
            self._time_offset = max((float(r["time"]) for r in kept if _is_number(r.get("time"))), default=0.0)
            self._file = open(self._path, "a", encoding="utf-8")
        except OSError as e:
            raise MetricsLogError(f"cannot open {self._path} for writing: {e.strerror or e}") from e
        self._start = time.monotonic()
        purge = None if resume_from_step is None else resume_from_step + 1
        self._tb = SummaryWriter(logdir=str(self._run_dir), purge_step=purge)

    @property
    def path(self) -> pathlib.Path:
        return self._path

    def write(self, step: int, metrics: Mapping[str, Any], *, role: str | None = None) -> None:
        """Logs `metrics` (name -> number) at `step`, under `role` if given."""
        record: dict[str, Any] = {"step": int(step), "time": round(self._time_offset + time.monotonic() - self._start, 3)}
        if role is not None:
            record["role"] = str(role)
        values = {}
        for name, value in metrics.items():
            if name in RESERVED_KEYS:
                raise ValueError(f"metric name {name!r} is reserved (reserved: {', '.join(RESERVED_KEYS)})")
            values[name] = _as_number(name, value)
        for name, value in values.items():
            record[name] = _encode(value)
        try:
            self._file.write(json.dumps(record, allow_nan=False) + "\n")
            # Flush the line now: a crash then loses at most the line being written.
            self._file.flush()
        except OSError as e:
            raise MetricsLogError(f"cannot append to {self._path}: {e.strerror or e}") from e
        for name, value in values.items():
            tag = f"{role}/{name}" if role is not None else name
            self._tb.add_scalar(tag, float(value), global_step=int(step))

    def flush(self) -> None:
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as e:
            raise MetricsLogError(f"cannot flush {self._path}: {e.strerror or e}") from e
        self._tb.flush()

    def close(self) -> None:
        if self._file.closed:
            return
        self.flush()
        self._file.close()
        self._tb.close()

    def __enter__(self) -> "MetricsLogger":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def read_metrics(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """All records of `RUN/metrics.jsonl` in order ([] if there is no log yet).

    A damaged last line (a crash mid-write) is skipped; a damaged line
    elsewhere raises MetricsLogError naming the line.
    """
    path = pathlib.Path(run_dir) / METRICS_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as e:
        raise MetricsLogError(f"cannot read {path}: {e.strerror or e}") from e
    return _parse(path, text)[0]


def _parse(path: pathlib.Path, text: str) -> tuple[list[dict[str, Any]], bool]:
    """Returns the records and whether the text needs repair (a damaged or unterminated last line)."""
    lines = text.split("\n")
    # A complete file ends with "\n", so the last piece is "" unless the final write was cut off.
    unterminated = lines[-1] != ""
    lines = lines if unterminated else lines[:-1]
    records, damaged_tail = [], False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                raise ValueError("not an object with an integer step")
        except ValueError as e:
            if number == len(lines):
                damaged_tail = True
                break
            raise MetricsLogError(f"{path} line {number} is not a metrics record: {e}") from e
        records.append({k: v if k == "role" else _decode(v) for k, v in record.items()})
    return records, damaged_tail or unterminated


def _repair(path: pathlib.Path, resume_from_step: int | None) -> list[dict[str, Any]]:
    """Drops a cut-off last line and, on resume, lines after `resume_from_step`; returns the kept records."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    records, needs_repair = _parse(path, text)
    kept = records if resume_from_step is None else [r for r in records if r["step"] <= resume_from_step]
    if needs_repair or len(kept) != len(records):
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for record in kept:
                f.write(json.dumps({k: _encode(v) for k, v in record.items()}, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return kept


def _as_number(name: str, value: Any) -> int | float:
    # Accepts Python, numpy and jax scalars (0-d arrays); integers stay integers in the JSON.
    if isinstance(value, (bool, int, float)):
        return int(value) if isinstance(value, (bool, int)) else float(value)
    array = np.asarray(value)
    if array.shape != () or array.dtype.kind not in "biuf":
        raise TypeError(f"metric {name!r} must be a number, got {type(value).__name__} {array.dtype}{array.shape}")
    return int(array) if array.dtype.kind in "biu" else float(array)


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, str) and value in _NON_FINITE:
        return _NON_FINITE[value]
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
