"""The one typed config of a moozi run, its per-game presets, and loading/overrides.

A run's config is built as: base defaults -> the game's preset -> a config file
(`--config FILE`, TOML or JSON) -> `--set key=value` items. Every step is
validated: unknown keys and bad values raise ConfigError naming the key and
what is allowed. Configs are frozen; derived values come from functions.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import tomllib
from typing import Any, Literal, Mapping

from moozi.config_tools import ConfigError, apply_overrides, flatten_overrides, from_dict, to_dict
from moozi.core.learner import OptimizerConfig
from moozi.core.loss import LossConfig
from moozi.core.network import NetworkConfig
from moozi.core.planner import PlannerConfig
from moozi.core.replay import ReplayConfig
from moozi.core.targets import TargetConfig


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """How each training rollout worker steps its environments."""

    num_envs: int = 16  # B: environments per training rollout worker, stepped as one batch
    num_processes: int = 1  # P: processes stepping those B host envs (Cleanba 4.1); ignored by JAX-native games
    sticky_action_prob: float | None = None  # None: the library's protocol (MinAtar 0.1, Atari 0.25)
    full_action_space: bool = False  # MinAtar / Atari: use the full action set instead of the minimal one


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The driver's schedule (thesis 5.2.1, 5.2.12-5.2.17; Cleanba 4.2 synchronisation)."""

    batch_size: int = 256  # training targets per update
    rollout_steps: int = 16  # env steps each training env takes per iteration (one policy version)
    updates_per_iteration: int = 4  # parameter updates per iteration; with rollout_steps sets the replay ratio
    num_training_workers: int = 1  # training rollout workers, each with its own B envs and seeds
    reanalyze_fraction: float = 0.0  # share of trajectories fed to the buffer by reanalyze instead of fresh play
    reanalyze_num_envs: int = 16  # mock envs per reanalyze worker
    test_every_updates: int = 200  # run the testing rollout worker every n updates (0: never)
    test_episodes: int = 20  # episodes (or games against a random player) per test
    # A test stops after this many steps, episodes still running counted with their return so far
    # (logged as test_cut_episodes): MinAtar games end only when the player loses, so a good greedy
    # agent's test could otherwise run for hours, blocking the run and its stop signals.
    test_max_steps: int = 5_000
    checkpoint_every_minutes: float = 5.0  # M: also on SIGINT/SIGTERM and at the end
    keep_checkpoints: int = 3  # older checkpoints are deleted once a newer one is complete
    # Keep the parameters that scored best in the in-training test as RUN/checkpoints/BEST,
    # which `load_agent` plays by default (a strong checkpoint is not lost to a weaker later one).
    keep_best: bool = True
    log_every_updates: int = 20  # metrics.jsonl / TensorBoard cadence
    max_env_steps: int | None = None  # stop after this many env steps in total (also --max-env-steps)
    max_minutes: float | None = None  # stop after this much wall-clock time (also --max-minutes)
    # epsilon-greedy exploration (design note 003): with probability epsilon a training worker plays a
    # uniformly random legal move instead of the search's; the policy target stays the search's p*.
    # epsilon moves linearly from `_start` to `_end` over `_env_steps` env steps (per worker), then stays.
    epsilon_start: float = 0.0
    epsilon_end: float = 0.0
    epsilon_env_steps: int = 1
    # Resignation (ELF OpenGo A.4), two-player games on the host path: a player resigns when its root
    # value falls below a threshold calibrated on the episodes played to the end without resignation.
    resign: bool = False
    resign_false_positive_rate: float = 0.05  # target share of resignations in games the player would not have lost
    resign_disabled_fraction: float = 0.1  # share of episodes played to the end (they calibrate the threshold)
    resign_min_games: int = 100  # player-games seen before anyone may resign


@dataclasses.dataclass(frozen=True)
class BackendConfig:
    """Where the roles run."""

    kind: Literal["inline", "ray"] = "inline"  # inline: one process; ray: one Ray actor per role
    # inline: each role runs its calls in order on a thread of its own, so the learner's update and
    # the rollouts overlap (same results: every call still sees the same inputs in the same order);
    # false runs every call at once in the driver's thread (easier to step through in a debugger).
    inline_threads: bool = True
    ray_address: str | None = None  # None: start a local Ray instance; else join this cluster
    bind_host: str = "127.0.0.1"  # every listener (Ray dashboard, node manager) binds here unless changed
    include_dashboard: bool = False  # the Ray dashboard, bound to bind_host
    rollout_worker_cpus: float = 1.0  # Ray resources of each training rollout worker
    rollout_worker_gpus: float = 0.0
    learner_cpus: float = 1.0
    learner_gpus: float = 0.0
    replay_cpus: float = 0.5


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything that defines a run. Saved resolved as RUN/config.json."""

    game: str = "tic_tac_toe"  # a preset or a library-qualified name (see `moozi games`)
    # muzero: plan with a learned model. alphazero: plan with the game's rules (a pgx game, or the
    # pgx twin of an OpenSpiel board game, see moozi/envs/twins.py); trains h and f only (K = 0).
    agent: Literal["muzero", "alphazero"] = "muzero"
    seed: int = 0  # one seed drives every RNG of the run
    env: EnvConfig = EnvConfig()
    network: NetworkConfig = NetworkConfig()
    planner: PlannerConfig = PlannerConfig()  # training rollout workers' search (exploration on)
    targets: TargetConfig = TargetConfig()
    replay: ReplayConfig = ReplayConfig()
    loss: LossConfig = LossConfig()
    optimizer: OptimizerConfig = OptimizerConfig()
    train: TrainConfig = TrainConfig()
    backend: BackendConfig = BackendConfig()


# Small presets over the base config: only what differs per game (STYLE: no copied config per game).
PRESETS: dict[str, dict[str, Any]] = {
    "tic_tac_toe": {
        "network.kind": "mlp",
        "network.mlp_hidden_sizes": (64, 64),
        # Values and rewards lie in [-1, 1]: phi(±1) = ±0.415, so categories -1..1 cover them;
        # the default -5..5 lets stray mass on far categories decode to values far outside [-1, 1].
        "network.support.min_value": -1,
        "network.support.max_value": 1,
        # Gumbel MuZero: its policy target (softmax of logits + completed Q) is good with few
        # simulations, and 16 simulations make acting ~4x cheaper than 25 PUCT ones on CPU.
        "planner.search_policy": "gumbel_muzero",
        "planner.num_simulations": 16,
        "planner.max_num_considered_actions": 9,  # every legal move is considered at the root
        # Exploration: with scale 1 self-play collapses to a few drawn lines (policy entropy ~0.2)
        # and never sees the positions a random opponent creates. The Gumbel noise only changes
        # the acted move, not the policy target; tests and eval run with scale 0.
        "planner.gumbel_scale": 3.0,
        "planner.discount": 1.0,
        "planner.dirichlet_alpha": 0.5,
        # Full-weight value loss: values drive the search here (0.25 is for replayed Atari data).
        "loss.value_coef": 1.0,
        "targets.history_length": 1,
        "targets.td_steps": 9,
        "targets.discount": 1.0,
        "targets.num_unroll_steps": 3,
        "env.num_envs": 32,
        "train.batch_size": 128,
        "train.rollout_steps": 4,
        # 4 updates of 128 per 128 new steps, at learning rate 3e-3: on this game's tiny network the
        # loop is bound by Python dispatch, so learning more from each step is what buys time. One
        # seed each, one core: no losses to minimax after 2.07 min at (4, 1e-3), 2.63 at (2, 3e-3),
        # 1.58 at (4, 3e-3); the old preset (2, 1e-3, a test every 100 updates) had not got there in 4.1 min.
        "train.updates_per_iteration": 4,
        "optimizer.learning_rate": 3e-3,
        # A test every 1000 updates (~15 s): every 100 cost ~10% of the run's time.
        "train.test_every_updates": 1000,
        "train.test_episodes": 50,  # 20 games give +-0.1 noise on the win rate
        "replay.capacity": 20_000,
        "replay.min_fill": 500,
    },
    "connect_four": {
        # As for tic-tac-toe: Gumbel MuZero's policy target is good with few simulations, which
        # buys more games per minute on a CPU; every column is considered at the root.
        # 16 simulations and 8 updates per iteration (2 samples per collected step): one core,
        # seed 0, 20 minutes, 124 GFLOP/s matmul: solver keeps-result 0.567 at 1600 updates, against
        # 0.459 at 800 updates with 32 simulations and 4 updates (docs/board_games.md). On a CPU
        # the search is the expensive part, so each collected step is worth learning from twice.
        "planner.search_policy": "gumbel_muzero",
        "planner.num_simulations": 16,
        "train.updates_per_iteration": 8,
        "planner.max_num_considered_actions": 7,
        "planner.discount": 1.0,
        "network.support.min_value": -1,  # outcomes lie in [-1, 1] (see tic_tac_toe)
        "network.support.max_value": 1,
        # No phi squashing: a win is one-hot on the top category (docs/board_games.md).
        "network.support.transform": "identity",
        # Layer norm: acting and training compute the same function; batch norm's running moments
        # mostly described unrolled states (the prediction network runs K + 1 times per update).
        "network.normalization": "layer",
        "network.channels": 32,
        "network.representation_blocks": 3,
        "network.dynamics_blocks": 1,
        "loss.value_coef": 1.0,
        "targets.history_length": 1,
        "targets.td_steps": 42,  # the longest game: a Monte-Carlo return
        "targets.discount": 1.0,
        "env.num_envs": 32,
        "train.batch_size": 128,
        "replay.capacity": 200_000,
        "replay.min_fill": 2_000,
        # Uniform, as AlphaZero samples: with +-1 Monte-Carlo targets |v - z| mostly measures how
        # unpredictable a position still is, and proportional sampling down-weighted late positions.
        "replay.sampling": "uniform",
    },
    "go9": {
        "planner.num_simulations": 50,
        "planner.discount": 1.0,
        "targets.history_length": 1,
        "targets.td_steps": 200,
        "targets.discount": 1.0,
        "planner.dirichlet_alpha": 0.1,
        "env.num_envs": 16,
        "replay.capacity": 400_000,
        "replay.min_fill": 5_000,
    },
    "cartpole": {
        "network.kind": "mlp",
        "planner.num_simulations": 50,  # muzero-general's cartpole setting
        "targets.history_length": 1,
        "targets.td_steps": 10,
        "env.num_envs": 16,
        "replay.capacity": 50_000,
        "replay.min_fill": 1_000,
    },
}
_MINATAR_PRESET = {
    # Sized for a 2-core CPU: 6 residual blocks and batch 256 gave 86 env steps/s and 0.67
    # updates/s; 2 representation blocks, 1 dynamics block and batch 128 give ~220 env steps/s
    # at the same ratio of sampled to collected steps (1:1 with 32 envs x 16 steps per 4 updates).
    "network.representation_blocks": 2,
    "network.dynamics_blocks": 1,
    "train.batch_size": 128,
    # PUCT with 16 simulations collapsed onto one action (visit entropy 0.01, policy entropy 0.3)
    # and Breakout's return stayed at the random policy's ~0.5 for 170k steps; Gumbel MuZero's
    # policy target improves on the prior even with few simulations and its acting keeps sampling.
    "planner.search_policy": "gumbel_muzero",
    "planner.num_simulations": 16,
    "targets.history_length": 2,
    "targets.td_steps": 10,
    "env.num_envs": 32,
    "replay.capacity": 200_000,
    "replay.min_fill": 2_000,
}
for _name in ("breakout", "asterix", "freeway", "seaquest", "space_invaders"):
    PRESETS[_name] = dict(_MINATAR_PRESET)


def preset_overrides(game: str) -> dict[str, Any]:
    """The preset for a game name (empty for library-qualified names without a preset)."""
    return dict(PRESETS.get(game, {}))


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
    config = apply_overrides(config, preset_overrides(game))
    if config_file is not None:
        file_overrides = load_config_file(config_file)
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


def validate(config: Config) -> None:
    """Cross-field checks that single-field parsing cannot see."""
    positive = {
        "env.num_envs": config.env.num_envs,
        "env.num_processes": config.env.num_processes,
        "train.batch_size": config.train.batch_size,
        "train.rollout_steps": config.train.rollout_steps,
        "train.updates_per_iteration": config.train.updates_per_iteration,
        "train.num_training_workers": config.train.num_training_workers,
        "train.log_every_updates": config.train.log_every_updates,
        "train.test_max_steps": config.train.test_max_steps,
        "train.keep_checkpoints": config.train.keep_checkpoints,
        "planner.num_simulations": config.planner.num_simulations,
        "targets.history_length": config.targets.history_length,
        "targets.td_steps": config.targets.td_steps,
    }
    if config.agent == "muzero":
        positive["targets.num_unroll_steps"] = config.targets.num_unroll_steps
    elif config.targets.num_unroll_steps != 0:
        raise ConfigError("targets.num_unroll_steps must be 0 with agent=alphazero (its model is the game, not learned)")
    for key, value in positive.items():
        if value < 1:
            raise ConfigError(f"bad value {value!r} for {key}: expected a positive integer")
    if config.env.num_processes > config.env.num_envs:
        raise ConfigError(
            f"env.num_processes={config.env.num_processes} exceeds env.num_envs={config.env.num_envs}: "
            "each process needs at least one env"
        )
    if not 0.0 <= config.train.reanalyze_fraction < 1.0:
        raise ConfigError(f"bad value {config.train.reanalyze_fraction!r} for train.reanalyze_fraction: expected 0 <= x < 1")
    if config.train.test_every_updates < 0:
        raise ConfigError("bad value for train.test_every_updates: expected 0 (never) or a positive integer")
    if config.env.sticky_action_prob is not None and not 0.0 <= config.env.sticky_action_prob <= 1.0:
        raise ConfigError(f"bad value {config.env.sticky_action_prob!r} for env.sticky_action_prob: expected 0 <= p <= 1")
    for key in ("epsilon_start", "epsilon_end"):
        if not 0.0 <= getattr(config.train, key) <= 1.0:
            raise ConfigError(f"bad value {getattr(config.train, key)!r} for train.{key}: expected 0 <= x <= 1")
    if config.train.epsilon_env_steps < 1:
        raise ConfigError("bad value for train.epsilon_env_steps: expected a positive integer")
    if not 0.0 < config.train.resign_false_positive_rate < 1.0:
        raise ConfigError("bad value for train.resign_false_positive_rate: expected 0 < x < 1")
    if not 0.0 < config.train.resign_disabled_fraction <= 1.0:
        raise ConfigError("bad value for train.resign_disabled_fraction: expected 0 < x <= 1 (some games must calibrate)")
    if config.train.checkpoint_every_minutes <= 0:
        raise ConfigError("bad value for train.checkpoint_every_minutes: expected a positive number")


def epsilon_at(train: TrainConfig, env_steps: int) -> float:
    """The epsilon-greedy schedule after `env_steps` env steps of one worker."""
    progress = min(env_steps / train.epsilon_env_steps, 1.0)
    return train.epsilon_start + (train.epsilon_end - train.epsilon_start) * progress


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
