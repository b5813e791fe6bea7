"""The one place a run's agent picks its driver: MuZero and AlphaZero run their roles (search, replay,
reanalyze) under `Driver`; the model-free PPO and IMPALA run their actor-critic loop under
`ActorCriticDriver`. Both take the same config, run directory and flags, and leave the same files."""

from __future__ import annotations

import dataclasses
import pathlib

from moozi.builders import is_actor_critic
from moozi.config import Config, load_saved_config
from moozi.training.actor_critic_driver import ActorCriticDriver
from moozi.training.driver import Driver


def make_driver(config: Config, run_dir: str | pathlib.Path, *, resume: bool = False,
                progress: bool = True) -> Driver | ActorCriticDriver:
    run_dir = pathlib.Path(run_dir)
    if resume and (run_dir / "config.json").exists():
        # A resumed run keeps its saved agent, whatever the command line's config says.
        config = dataclasses.replace(config, agent=load_saved_config(run_dir / "config.json").agent)
    driver_class = ActorCriticDriver if is_actor_critic(config) else Driver
    return driver_class(config, run_dir, resume=resume, progress=progress)
