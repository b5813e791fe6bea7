"""The one typed config of a moozi run: its sections, cross-field validation and schedules.

Configs are frozen dataclasses; derived values come from functions
(`epsilon_at`). Building a config (defaults -> preset -> file -> `--set`) is
moozi/config/loading.py; the per-game presets are moozi/config/presets.py.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from moozi.actor_critic.impala import IMPALAConfig
from moozi.actor_critic.ppo import PPOConfig
from moozi.config.overrides import ConfigError
from moozi.core.loss import LossConfig
from moozi.core.network import NetworkConfig
from moozi.core.planner import PlannerConfig
from moozi.core.replay import ReplayConfig
from moozi.core.targets import TargetConfig
from moozi.core.train_step import OptimizerConfig


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """How each training rollout worker steps its environments."""

    num_envs: int = 16  # B: environments per training rollout worker, stepped as one batch
    num_processes: int = 1  # P: processes stepping those B host envs (Cleanba 4.1); ignored by JAX-native games
    sticky_action_prob: float | None = None  # None: the library's protocol (MinAtar 0.1, Atari 0.25)
    full_action_space: bool = False  # MinAtar / Atari: use the full action set instead of the minimal one
    # pgx's go: liberty (1, 2, >= 3 per colour, so atari too) and ko planes beside the stones
    # (moozi/envs/go_features.py).
    go_features: bool = False
    # pgx's backgammon: TD-Gammon's per-point encoding of the board, bars, trays and pip counts beside
    # pgx's raw counts (moozi/envs/backgammon_features.py).
    backgammon_features: bool = False


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The driver's schedule (thesis 5.2.1, 5.2.12-5.2.17; Cleanba 4.2 synchronisation)."""

    batch_size: int = 256  # training targets per update
    rollout_steps: int = 16  # env steps each training env takes per iteration (one policy version)
    updates_per_iteration: int = 4  # parameter updates per iteration; with rollout_steps sets the replay ratio
    # Training rollout workers, each with its own B envs and seeds; "auto": as many as the CPUs that the
    # other roles leave free fit (the cluster's with --ray-address, else this machine's), at least one.
    num_training_workers: int | Literal["auto"] = 1
    reanalyze_fraction: float = 0.0  # share of trajectories fed to the buffer by reanalyze instead of fresh play
    reanalyze_num_envs: int = 16  # mock envs per reanalyze worker
    test_every_updates: int = 200  # run the testing rollout worker every n updates (0: never)
    test_episodes: int = 20  # episodes (or games against a random player) per test
    # A test stops after this many steps, episodes still running counted with their return so far
    # (logged as test_cut_episodes): MinAtar games end only when the player loses, so a good greedy
    # agent's test could otherwise run for hours, blocking the run and its stop signals.
    test_max_steps: int = 5_000
    checkpoint_every_minutes: float = 5.0  # M: also on SIGINT/SIGTERM and at the end
    # Also a checkpoint at the end of the iteration that reaches each of these env-step counts (the
    # whole run's, as --max-env-steps counts them): runs compared at equal experience, e.g. MinAtar at
    # the 5M steps of the published curves. train.keep_checkpoints still prunes them like any other.
    checkpoint_at_env_steps: tuple[int, ...] = ()
    # After SIGINT/SIGTERM or --max-minutes, how long the iteration in flight may take to end (then a
    # checkpoint is written) before the run gives it up and keeps the last checkpoint (a second signal:
    # at once). A slow or lost role can thus never keep a run from stopping.
    stop_grace_seconds: float = 10.0
    keep_checkpoints: int = 3  # older checkpoints are deleted once a newer one is complete
    # Keep the parameters that scored best in the in-training test as RUN/checkpoints/BEST,
    # which `load_agent` plays by default (a strong checkpoint is not lost to a weaker later one).
    keep_best: bool = True
    # The network the agent of this run plays: the in-training tests (and so BEST), `load_agent` and
    # `moozi eval`. "online": the parameters as the last update left them. "target": the target
    # network, with optimizer.target_ema_decay > 0 an average of the recent online parameters, which
    # swings less between checkpoints. Training rollout workers always act with the online network.
    agent_network: Literal["online", "target"] = "online"
    log_every_updates: int = 20  # metrics.jsonl / TensorBoard cadence
    max_env_steps: int | None = None  # stop after this many env steps in total (also --max-env-steps)
    max_minutes: float | None = None  # stop after this much wall-clock time (also --max-minutes)
    # epsilon-greedy exploration (the AlphaZero-for-Go design notes, docs/board_games.md): with probability epsilon a training worker plays a
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
    # Go self-play, agent=muzero (moozi/training/selfplay_passes.py): before this move of a game a
    # player may pass only right after its opponent's pass. 0: passing is always legal.
    no_pass_before_move: int = 0


@dataclasses.dataclass(frozen=True)
class BackendConfig:
    """Where the roles run."""

    kind: Literal["inline", "ray"] = "inline"  # inline: one process; ray: one Ray actor per role
    # The JAX platform the roles compute on (learner, acting, the Anakin loops; docs/gpu.md). "auto":
    # JAX's default backend (a GPU where jax has CUDA, else the CPU); "cpu", "gpu", "tpu": that
    # platform's first device, an error naming the devices there are when it has none. Inline backend
    # only: Ray gives each role the devices of its resources (learner_gpus, rollout_worker_gpus).
    device: Literal["auto", "cpu", "gpu", "tpu"] = "auto"
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
    # Ray: a role asking for N whole CPUs runs on N cores of its node of its own, so that each role's
    # XLA thread pool is as wide as its share (moozi/training/backends/ray_cores.py). "auto": only
    # where the roles' whole CPUs reach the node's cores; "on": always; "off": every role may run on
    # every core. Off by default: on 2 vCPUs the go9 loop ran no faster confined (docs/performance.md).
    role_cores: Literal["off", "auto", "on"] = "off"
    # Ray: every role's resources are reserved before any starts (all or nothing), so a run never
    # half-starts. The learner, the replay buffer and the testing worker share one node (the driver's
    # when it has room); the rollout workers are placed by this strategy: SPREAD puts them on as many
    # nodes as it can (rollouts scale out), PACK on as few.
    placement_strategy: Literal["PACK", "SPREAD"] = "SPREAD"
    # How long the cluster may take to place every role before the run stops with what it asked for.
    placement_timeout_seconds: float = 15.0
    # The longest wait for any one call of a role (a rollout, an update, a test) before the run stops
    # with an error naming the call; a wait is given up sooner when the run is asked to stop.
    wait_timeout_seconds: float = 900.0


@dataclasses.dataclass(frozen=True)
class StochasticConfig:
    """agent=stochastic_muzero's chance model (docs/stochastic.md): the codebook and the loss's chance terms."""

    # C: chance codes the encoder assigns to transitions and sigma predicts. 32 covers 2048's new tile
    # (2 or 4 on one of 16 cells) and backgammon's 21 rolls; LightZero's 2048 uses 32.
    num_chance_outcomes: int = 32
    afterstate_value_coef: float = 0.25  # c_Q: Q(s, a) = v(as) on the value head's target (loss.value_coef's default)
    # Q's target. "return": the value head's own target z_{t+k} (the paper). "next_value": one step,
    # r_{t+k+1} + gamma v(o_{t+k+1}) with v the target network's value of the real next position
    # (TD-Gammon's afterstate TD(0)): the move's own consequence, without the rest of the game's noise.
    afterstate_value_target: Literal["return", "next_value"] = "return"
    chance_coef: float = 1.0  # c_sigma: sigma's cross-entropy against the encoder's code (the paper's 1)
    commitment_coef: float = 0.25  # beta: the encoder's commitment cost (VQ-VAE's 0.25)
    # Which unrolled states the consistency loss (loss.consistency_coef) compares with the representation of
    # the real position: "first", s^1 only (loss.py, as MuZero's agent); "all", s^1 .. s^K (EfficientZero's
    # whole-unroll similarity loss), which trains the afterstate map through every step (docs/stochastic.md).
    consistency_steps: Literal["first", "all"] = "first"


STOCHASTIC_AGENT = "stochastic_muzero"
SEARCH_AGENTS = ("muzero", "alphazero", STOCHASTIC_AGENT)  # plan with a model; a target network; replay


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything that defines a run. Saved resolved as RUN/config.json."""

    game: str = "tic_tac_toe"  # a preset or a library-qualified name (see `moozi games`)
    # muzero: plan with a learned model. alphazero: plan with the game's rules (a pgx game, or the
    # pgx twin of an OpenSpiel board game, see moozi/envs/twins.py); trains h and f only (K = 0).
    # ppo, impala: model-free actor-critics (moozi/actor_critic) for one-player games, set by their own
    # sections (`ppo.*`, `impala.*`); the planner, targets, replay, loss and optimizer sections are
    # MuZero's and do not apply to them. stochastic_muzero: Stochastic MuZero (docs/stochastic.md), a
    # learned model with chance outcomes, set by MuZero's sections plus `stochastic.*`; PUCT search only.
    agent: Literal["muzero", "alphazero", "stochastic_muzero", "ppo", "impala"] = "muzero"
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
    ppo: PPOConfig = PPOConfig()
    impala: IMPALAConfig = IMPALAConfig()
    stochastic: StochasticConfig = StochasticConfig()  # agent=stochastic_muzero only


def validate(config: Config) -> None:
    """Cross-field checks that single-field parsing cannot see."""
    positive = {
        "env.num_envs": config.env.num_envs,
        "env.num_processes": config.env.num_processes,
        "train.batch_size": config.train.batch_size,
        "train.rollout_steps": config.train.rollout_steps,
        "train.updates_per_iteration": config.train.updates_per_iteration,
        "train.num_training_workers": 1 if config.train.num_training_workers == "auto" else config.train.num_training_workers,
        "train.log_every_updates": config.train.log_every_updates,
        "train.test_max_steps": config.train.test_max_steps,
        "train.keep_checkpoints": config.train.keep_checkpoints,
        "planner.num_simulations": config.planner.num_simulations,
        "targets.history_length": config.targets.history_length,
        "targets.td_steps": config.targets.td_steps,
    }
    if config.agent in ("muzero", STOCHASTIC_AGENT):
        positive["targets.num_unroll_steps"] = config.targets.num_unroll_steps
    elif config.agent == "alphazero" and config.targets.num_unroll_steps != 0:
        raise ConfigError("targets.num_unroll_steps must be 0 with agent=alphazero (its model is the game, not learned)")
    for key, value in positive.items():
        if value < 1:
            raise ConfigError(f"bad value {value!r} for {key}: expected a positive integer")
    if config.train.agent_network == "target" and config.agent not in SEARCH_AGENTS:
        raise ConfigError(
            f"train.agent_network='target' needs agent=muzero, agent=alphazero or agent=stochastic_muzero (a "
            f"target network); agent={config.agent!r} plays its online parameters"
        )
    if config.agent == STOCHASTIC_AGENT:
        _validate_stochastic(config)
    if config.planner.chance_search == "exact":
        _validate_exact_chance(config)
    if config.env.num_processes > config.env.num_envs:
        raise ConfigError(
            f"env.num_processes={config.env.num_processes} exceeds env.num_envs={config.env.num_envs}: "
            "each process needs at least one env"
        )
    if not 0.0 <= config.train.reanalyze_fraction < 1.0:
        raise ConfigError(f"bad value {config.train.reanalyze_fraction!r} for train.reanalyze_fraction: expected 0 <= x < 1")
    if config.train.no_pass_before_move < 0:
        raise ConfigError("bad value for train.no_pass_before_move: expected 0 (passing always legal) or a move number")
    if config.train.no_pass_before_move and config.agent != "muzero":
        raise ConfigError(
            f"train.no_pass_before_move is for agent=muzero's self-play on OpenSpiel's go; agent={config.agent!r} "
            "does not take it (AlphaZero mode's search sees two passes end the game)"
        )
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
    if config.backend.kind == "ray" and config.backend.device != "auto":
        raise ConfigError(
            f"backend.device={config.backend.device!r} needs backend.kind=inline: with Ray each role computes on "
            "the devices of its Ray resources (backend.learner_gpus, backend.rollout_worker_gpus)"
        )
    for key in ("placement_timeout_seconds", "wait_timeout_seconds"):
        if getattr(config.backend, key) <= 0:
            raise ConfigError(f"bad value for backend.{key}: expected a positive number of seconds")
    if config.train.stop_grace_seconds < 0:
        raise ConfigError("bad value for train.stop_grace_seconds: expected 0 or a positive number of seconds")
    if config.train.checkpoint_every_minutes <= 0:
        raise ConfigError("bad value for train.checkpoint_every_minutes: expected a positive number")
    if any(n <= 0 for n in config.train.checkpoint_at_env_steps):
        raise ConfigError("bad value for train.checkpoint_at_env_steps: expected positive env-step counts, "
                          f"got {list(config.train.checkpoint_at_env_steps)}")
    # The replay gathers what the learner bootstraps from: both sides must name the same source,
    # else the learner stops at its first update (no observations to evaluate) or the replay gathers
    # observations nobody reads.
    gathered = config.targets.bootstrap_from.value  # TargetConfig holds a BootstrapSource
    if gathered != config.loss.bootstrap_from:
        raise ConfigError(
            f"targets.bootstrap_from={gathered!r} and loss.bootstrap_from={config.loss.bootstrap_from!r} differ: "
            "set both to 'search' or both to 'target_network'"
        )


def _validate_stochastic(config: Config) -> None:
    """agent=stochastic_muzero's checks: its search, its codebook and its loss weights."""
    policy = config.planner.search_policy.value  # PlannerConfig holds a SearchPolicy
    if policy != "muzero":
        raise ConfigError(
            f"planner.search_policy={policy!r} is not allowed with agent=stochastic_muzero; allowed: 'muzero' "
            "(PUCT: mctx has no Gumbel policy with chance nodes)"
        )
    if config.stochastic.num_chance_outcomes < 2:
        raise ConfigError(
            f"bad value {config.stochastic.num_chance_outcomes!r} for stochastic.num_chance_outcomes: expected an "
            "integer >= 2 (one code cannot tell outcomes apart)"
        )
    for key in ("afterstate_value_coef", "chance_coef", "commitment_coef"):
        value = getattr(config.stochastic, key)
        if value < 0:
            raise ConfigError(f"bad value {value!r} for stochastic.{key}: expected a number >= 0")


def _validate_exact_chance(config: Config) -> None:
    """planner.chance_search='exact' (moozi/core/alphazero_chance.py): AlphaZero mode, PUCT, and a game
    whose bridge splits its step into afterstate and chance outcome."""
    from moozi.envs.afterstates import EXACT_CHANCE_GAMES
    from moozi.envs.registry import resolve_game_name

    if config.agent != "alphazero":
        raise ConfigError(f"planner.chance_search='exact' is for agent=alphazero (a search over the game's rules); "
                          f"agent={config.agent!r} does not search the rules (leave it 'sampled')")
    if resolve_game_name(config.game) not in EXACT_CHANCE_GAMES:
        raise ConfigError(f"planner.chance_search='exact' needs a game whose chance outcomes the bridge gives "
                          f"exactly: {', '.join(EXACT_CHANCE_GAMES)}; {config.game!r} is not one (use 'sampled')")
    policy = config.planner.search_policy.value
    if policy != "muzero":
        raise ConfigError(f"planner.search_policy={policy!r} is not allowed with planner.chance_search='exact'; "
                          "allowed: 'muzero' (PUCT: mctx has no Gumbel policy with chance nodes)")


def resolve_rollout_workers(config: Config, cpus: float) -> Config:
    """The config with `train.num_training_workers="auto"` made a number: the training rollout workers
    that fit in `cpus` beside the other roles (learner, replay buffer, testing and reanalyze workers),
    at least one. A number is kept as it is."""
    if config.train.num_training_workers != "auto":
        return config
    b = config.backend
    others = b.learner_cpus + b.replay_cpus + TESTING_WORKER_CPUS
    if config.train.reanalyze_fraction > 0:
        others += b.rollout_worker_cpus
    workers = int((cpus - others + 1e-9) // b.rollout_worker_cpus) if b.rollout_worker_cpus > 0 else 1
    return dataclasses.replace(config, train=dataclasses.replace(config.train, num_training_workers=max(workers, 1)))


# Ray CPUs of the testing rollout worker: it plays only every train.test_every_updates updates.
TESTING_WORKER_CPUS = 0.5


def epsilon_at(train: TrainConfig, env_steps: int) -> float:
    """The epsilon-greedy schedule after `env_steps` env steps of one worker."""
    progress = min(env_steps / train.epsilon_env_steps, 1.0)
    return train.epsilon_start + (train.epsilon_end - train.epsilon_start) * progress
