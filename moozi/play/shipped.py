"""Agents that ship with the package: play a strong one without training it first.

A shipped agent is a small directory under `moozi/agents/<name>/`, named for the game preset it
plays, laid out like a run directory so that `load_agent` reads it like one:

    moozi/agents/connect_four/
        config.json                 the run's resolved config (checked on load like a run's)
        agent.json                  what it is: its strength as measured, the command that trained
                                    it, the result file that measured it
        checkpoints/BEST
        checkpoints/best-<step>/    the playing network's variables only ({"params", "batch_stats"},
                                    flax msgpack; no optimizer state, no replay), meta.json with
                                    `"contents": "agent_variables"` and a fingerprint of their shapes

`moozi.play.agent_export.export_agent` writes one from a run's checkpoint (docs/agents.md says how each was trained and how
to retrain it); `moozi agents` lists them; every command that takes a run directory (`play`, `eval`,
`gtp`) and `moozi.load_agent` also take a shipped agent's name where no run directory of that name
exists.
"""

from __future__ import annotations

import json
import os
import pathlib

from moozi.errors import MooziError

SHIPPED_DIR = pathlib.Path(__file__).resolve().parent.parent / "agents"
DESCRIPTION_FILE = "agent.json"
# meta.json's marker of a checkpoint that holds the playing network's variables and nothing else.
AGENT_VARIABLES = "agent_variables"
# What agent.json must say (the rest is free: measurements, notes).
REQUIRED_KEYS = ("game", "agent", "trained_by", "strength")


def shipped_agents() -> dict[str, dict]:
    """{name: its agent.json} of every agent shipped in this installation, by name."""
    out = {}
    if SHIPPED_DIR.is_dir():
        for path in sorted(SHIPPED_DIR.iterdir()):
            if (path / DESCRIPTION_FILE).is_file() and (path / "config.json").is_file():
                out[path.name] = json.loads((path / DESCRIPTION_FILE).read_text())
    return out


def shipped_agent_dir(name: str) -> pathlib.Path | None:
    """The directory of the shipped agent `name`, or None where none ships by that name."""
    if not isinstance(name, str) or os.sep in name or name in ("", ".", ".."):
        return None
    path = SHIPPED_DIR / name
    return path if (path / DESCRIPTION_FILE).is_file() and (path / "config.json").is_file() else None


def is_shipped(path: str | os.PathLike) -> bool:
    """Whether `path` is a shipped agent's directory (results are not written into the package)."""
    try:
        return pathlib.Path(path).resolve().parent == SHIPPED_DIR
    except OSError:
        return False


def agent_directory(run_or_name: str | os.PathLike) -> pathlib.Path:
    """The directory `load_agent` reads for `run_or_name`: a run directory where one exists (it always
    wins), else the shipped agent of that name; a clear error naming both where neither exists."""
    path = pathlib.Path(run_or_name)
    if (path / "config.json").exists():
        return path
    shipped = shipped_agent_dir(str(run_or_name))
    if shipped is not None:
        return shipped
    names = ", ".join(shipped_agents()) or "none in this installation"
    raise MooziError(f"{run_or_name} is not a moozi run directory (no config.json) and no shipped agent "
                     f"has that name (shipped: {names})")


def describe(name: str, info: dict) -> str:
    """A few lines about one shipped agent, for `moozi agents`."""
    lines = [f"{name}: {info['agent']} on {info['game']}, {info.get('simulations', '?')} simulations per move"]
    strength = info["strength"]
    lines += [f"  {line}" for line in (strength if isinstance(strength, list) else [strength])]
    lines.append(f"  trained by: {info['trained_by']}")
    if info.get("result_file"):
        lines.append(f"  measured in: {info['result_file']}")
    return "\n".join(lines)
