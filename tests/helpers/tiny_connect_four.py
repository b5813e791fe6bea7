"""Tiny run directories with freshly initialised parameters: a config and one checkpoint, no training.

Enough for `moozi.load_agent` and `moozi eval`, in a second instead of a training run.
"""

import pathlib

from tests.helpers.tiny import TINY

from moozi.runs.checkpoint import save_checkpoint
from moozi.config import build_config, save_config
from moozi.core.train_step import init_train_state
from moozi.builders import build_network, env_spec, example_stacked_obs, seed_key

TINY_MLP = {**TINY, "network.kind": "mlp"}


def tiny_config(game: str = "connect_four", **overrides):
    return build_config(game, overrides={**TINY_MLP, **{k: str(v) for k, v in overrides.items()}})


def fresh_variables(config):
    spec = env_spec(config)
    state = init_train_state(build_network(config, spec), config.optimizer, seed_key(config.seed, 0),
                             example_stacked_obs(config, spec))
    return state, {"params": state.params, "batch_stats": state.batch_stats}


def fresh_run(run_dir, game: str = "connect_four", **overrides) -> pathlib.Path:
    """A run directory whose only checkpoint holds the initial parameters of `game`'s tiny config."""
    config = tiny_config(game, **overrides)
    run_dir = pathlib.Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(config, run_dir / "config.json")
    train_state, _ = fresh_variables(config)
    save_checkpoint(run_dir, 0, train_state=train_state, arrays={}, meta={"game": env_spec(config).name})
    return run_dir
