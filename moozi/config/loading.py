"""Building, saving and loading a run's config.

A run's config is built as: base defaults -> the game's preset (with its part for the
run's agent) -> a config file (`--config FILE`, TOML or JSON) -> `--set key=value`
items. Every step is validated: unknown keys and bad values raise ConfigError naming
the key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import tomllib
from typing import Any, Mapping

from moozi.config.overrides import ConfigError, apply_overrides, flatten_overrides, from_dict, to_dict
from moozi.config.presets import preset_overrides
from moozi.config.schema import Config, validate


def load_config_file(path: str | pathlib.Path) -> dict[str, Any]:
    """Reads a TOML or JSON config file into flat dotted overrides."""
    path = pathlib.Path(path)
    try:
        text = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            data = tomllib.loads(text.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        first_line = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(f"config file {path} is not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {first_line}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"config file {path} must hold a table of settings")
    return flatten_overrides(data)


def build_config(
    game: str,
    *,
    config_file: str | pathlib.Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Defaults -> preset(game) -> config file -> overrides, each validated."""
    config = Config(game=game)
    file_overrides = load_config_file(config_file) if config_file is not None else {}
    # The agent the run will have decides the preset's agent part (presets.AGENT_PRESET_OVERRIDES);
    # the file and the overrides still win over every preset key.
    agent = {"agent": Config.agent, **preset_overrides(game), **file_overrides, **(overrides or {})}["agent"]
    config = apply_overrides(config, preset_overrides(game, str(agent)))
    if file_overrides:
        config = apply_overrides(config, file_overrides)
    if overrides:
        config = apply_overrides(config, overrides)
    if config.agent == "alphazero":
        config = alphazero_config(config)
    validate(config)
    return config


def alphazero_config(config: Config) -> Config:
    """AlphaZero mode's settings: the game's pgx twin as env and model, no dynamics unroll."""
    from moozi.envs.registry import resolve_game_name
    from moozi.envs.twins import pgx_twin, twins

    canonical = resolve_game_name(config.game)
    game = pgx_twin(canonical) or canonical
    if not game.startswith("pgx:"):
        raise ConfigError(
            f"agent=alphazero plans with the game's rules as a JAX function: it needs a pgx game or an "
            f"OpenSpiel game with a pgx twin ({', '.join(sorted(twins()))}); {config.game!r} has none "
            "(train it with agent=muzero)"
        )
    return dataclasses.replace(config, game=game, targets=dataclasses.replace(config.targets, num_unroll_steps=0))


def config_to_dict(config: Config) -> dict[str, Any]:
    return to_dict(config)


def config_from_dict(data: Mapping[str, Any]) -> Config:
    config = from_dict(Config, data)
    validate(config)
    return config


def save_config(config: Config, path: str | pathlib.Path) -> None:
    path = pathlib.Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(config_to_dict(config), indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def load_saved_config(path: str | pathlib.Path) -> Config:
    path = pathlib.Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(f"{path} is not valid JSON: {e}") from None
    return config_from_dict(data)
