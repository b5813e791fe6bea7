"""Environments: the step contract, and game names to envs.

Bridge modules (`moozi.envs.openspiel`, `.minatar`, `.gym`, `.pgx`, `.gymnax`)
are imported lazily by `make_env`, so importing this package needs no optional
extra.
"""

from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT, Env, EnvSpec, JaxEnv, StepOutput, empty_step
from moozi.envs.registry import (
    PRESET_GAMES,
    is_jax_native,
    list_games,
    make_env,
    register_game,
    resolve_game_name,
    unregister_game,
)

__all__ = [
    "DUMMY_ACTION",
    "SINGLE_AGENT",
    "Env",
    "EnvSpec",
    "JaxEnv",
    "StepOutput",
    "empty_step",
    "PRESET_GAMES",
    "is_jax_native",
    "list_games",
    "make_env",
    "register_game",
    "resolve_game_name",
    "unregister_game",
]
