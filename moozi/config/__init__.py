"""A run's configuration: typed sections (schema), per-game presets, and building one from overrides.

    config = build_config("connect_four", overrides={"planner.num_simulations": 32})
"""

from moozi.config.loading import (
    build_config,
    config_from_dict,
    config_to_dict,
    load_config_file,
    load_saved_config,
    save_config,
)
from moozi.config.overrides import ConfigError
from moozi.config.presets import LIBRARY_PRESETS, PRESET_OVERRIDES, preset_overrides
from moozi.config.schema import (
    TESTING_WORKER_CPUS,
    BackendConfig,
    Config,
    EnvConfig,
    TrainConfig,
    epsilon_at,
    resolve_rollout_workers,
    validate,
)

__all__ = [
    "TESTING_WORKER_CPUS",
    "BackendConfig",
    "Config",
    "ConfigError",
    "EnvConfig",
    "LIBRARY_PRESETS",
    "PRESET_OVERRIDES",
    "TrainConfig",
    "build_config",
    "config_from_dict",
    "config_to_dict",
    "epsilon_at",
    "load_config_file",
    "load_saved_config",
    "preset_overrides",
    "resolve_rollout_workers",
    "save_config",
    "validate",
]
