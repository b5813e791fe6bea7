"""A run's directory before the run: made (or checked to hold the run to resume) and writable, and the
config a resumed run continues with. Shared by every driver."""

from __future__ import annotations

import dataclasses
import pathlib

from moozi.config import Config, load_saved_config
from moozi.errors import MooziError


def prepare_run_dir(run_dir: pathlib.Path, resume: bool) -> None:
    """Checks that `run_dir` can hold this run (or holds the run to resume) and is writable."""
    if resume and not (run_dir / "config.json").exists():
        raise MooziError(f"cannot resume: {run_dir} has no config.json (not a moozi run directory)")
    if not resume and (run_dir / "checkpoints").exists() and any((run_dir / "checkpoints").iterdir()):
        raise MooziError(f"{run_dir} already holds a run: pass --resume to continue it, or choose another --run-dir")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write_test"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as e:
        raise MooziError(f"run directory {run_dir} is not writable: {e.strerror or e}") from None


def resumed_config(run_dir: pathlib.Path, requested: Config) -> Config:
    """The saved config of the run to resume, with the requested stopping rules, env-step checkpoints and
    backend: those may change on resume; everything that shapes learning may not."""
    saved = load_saved_config(run_dir / "config.json")
    return dataclasses.replace(saved, train=dataclasses.replace(
        saved.train, max_minutes=requested.train.max_minutes, max_env_steps=requested.train.max_env_steps,
        checkpoint_at_env_steps=requested.train.checkpoint_at_env_steps,
    ), backend=requested.backend)
