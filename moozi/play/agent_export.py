"""Writes a shipped agent (moozi.play.shipped) from a run: the playing network's variables, no more."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import tempfile

from moozi.errors import MooziError
from moozi.play.shipped import AGENT_VARIABLES, DESCRIPTION_FILE, REQUIRED_KEYS
from moozi.play.trained_agent import load_agent
from moozi.runs.checkpoint import save_best_checkpoint


def export_agent(run_dir: str | os.PathLike, out_dir: str | os.PathLike, *, description: dict,
                 checkpoint: str | os.PathLike | None = None) -> pathlib.Path:
    """Writes the agent `load_agent(run_dir, checkpoint=checkpoint)` plays as a shipped agent's directory
    `out_dir` (replacing one there): the run's config, the playing network's variables only, and
    `description` as agent.json. Written beside `out_dir` and renamed into place, so an interrupted
    export leaves the old agent intact."""
    missing = [key for key in REQUIRED_KEYS if key not in description]
    if missing:
        raise MooziError(f"a shipped agent's description needs {', '.join(missing)}")
    agent = load_agent(run_dir, checkpoint=checkpoint)
    if not hasattr(agent, "variables"):
        raise MooziError(f"only search agents (muzero, alphazero, stochastic_muzero) ship; {run_dir} is {agent.config.agent}")
    meta = json.loads((agent.checkpoint / "meta.json").read_text())
    out_dir = pathlib.Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        shutil.copyfile(pathlib.Path(run_dir) / "config.json", tmp / "config.json")
        counters = meta.get("counters", {})
        save_best_checkpoint(tmp, int(meta["step"]), train_state=agent.variables,
                             meta={"game": meta["game"], "contents": AGENT_VARIABLES, "counters": counters,
                                   "source_checkpoint": agent.checkpoint.name})
        full = {**description, "checkpoint": agent.checkpoint.name, "updates": counters.get("updates"),
                "env_steps": counters.get("env_steps"),
                "training_minutes": round(counters.get("elapsed_seconds", 0.0) / 60, 1)}
        (tmp / DESCRIPTION_FILE).write_text(json.dumps(full, indent=1) + "\n")
        old = out_dir.with_name(f".{out_dir.name}-old")
        if out_dir.exists():
            out_dir.rename(old)
        tmp.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir
