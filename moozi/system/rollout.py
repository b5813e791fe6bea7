"""Rollout workers (thesis 5.2.12-5.2.15): plain classes; the Ray backend wraps them at launch.

Each holds envs (or stored trajectories), a history state and a jitted acting
function, and returns data when the driver calls `run`; none of them loops
on its own (centralised control, thesis 5.2.1).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from moozi.config import Config, epsilon_at
from moozi.core.acting import make_act_fn
from moozi.core.types import Trajectory
from moozi.envs.base import EnvSpec
from moozi.envs.registry import is_jax_native, make_env
from moozi.history import init_history
from moozi.intervals import wilson_interval
from moozi.solvers.position_eval import CONNECT_FOUR_GAMES, PositionsEvaluator, test_positions
from moozi.system.components import (
    build_network,
    env_factory,
    env_options,
    env_spec,
    greedy_planner_config,
    make_acting,
    seed_key,
)
from moozi.system.episodes import EpisodeRecorder
from moozi.system.resign import SelfPlayResignation


def make_vector_env(config: Config, num_envs: int, seed: int, num_processes: int = 1):
    """B envs of the config's game: host envs over P processes, or a jitted batch for JAX-native games."""
    if is_jax_native(config.game):
        from moozi.system.jax_vector_env import JaxVectorEnv

        return JaxVectorEnv(make_env(config.game, **env_options(config)), num_envs, seed)
    from moozi.envs.vector import VectorEnv

    return VectorEnv(env_factory(config), num_envs, num_processes=num_processes, seed=seed)


def training_worker_class(config: Config) -> type:
    """The training rollout worker for the config's game: `AnakinRolloutWorker` for JAX-native
    games (the whole self-play segment is one jitted program), `TrainingRolloutWorker` otherwise."""
    if is_jax_native(config.game):
        from moozi.system.anakin_rollout import AnakinRolloutWorker

        return AnakinRolloutWorker
    return TrainingRolloutWorker


@dataclasses.dataclass
class RolloutResult:
    """What one call of a rollout worker returns to the driver."""

    trajectories: list[Trajectory]  # finished episodes, in the order they finished
    metrics: dict[str, float]
    policy_version: int  # the parameter version every action of this call was chosen with
    env_steps: int


class TrainingRolloutWorker:
    """Generates training trajectories with exploration on (thesis 5.2.13)."""

    def __init__(self, config: Config, worker_index: int = 0):
        self.config = config
        self.worker_index = worker_index
        self.spec: EnvSpec = env_spec(config)
        self.num_envs = config.env.num_envs
        # Distinct env seeds per worker; env i of worker w gets env_seed + i.
        self.env_seed = config.seed * 1_000_003 + worker_index * self.num_envs
        self.env = make_vector_env(config, self.num_envs, self.env_seed, config.env.num_processes)
        network = build_network(config, self.spec)
        self._act = make_act_fn(network, config.planner, self.spec, config.targets.history_length)
        self._rng = seed_key(config.seed, 1, worker_index)
        self._history = init_history(self.num_envs, config.targets.history_length, self.spec.obs_shape)
        self._recorder = EpisodeRecorder(self.spec, self.num_envs)
        self._step = None
        self._last_action = np.zeros(self.num_envs, np.int32)
        self._episode_return = np.zeros(self.num_envs, np.float64)
        self._resignation = (
            SelfPlayResignation(config.train, self.spec, self.num_envs, self.env_seed) if config.train.resign else None
        )
        self.env_steps = 0
        self.episodes = 0

    def run(self, params, num_steps: int, policy_version: int) -> RolloutResult:
        if self._step is None:
            self._step = self.env.reset()
        finished: list[Trajectory] = []
        returns, lengths = [], []
        act_time = env_time = 0.0
        search_depth = entropy = 0.0
        for _ in range(num_steps):
            t0 = time.perf_counter()
            self._rng, key = jax.random.split(self._rng)
            self._history, out = self._act(params, self._history, self._step, self._last_action, key)
            action = np.asarray(out.action, np.int32)
            t1 = time.perf_counter()
            step = self._step
            epsilon = epsilon_at(self.config.train, self.env_steps)
            if epsilon > 0:
                # Derived from the step's key, so a resumed worker draws the same moves.
                rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
                explore = (rng.random(self.num_envs) < epsilon) & ~step.is_last
                action = np.where(explore, _random_legal(rng, step.legal_actions), action).astype(np.int32)
            if self._resignation is not None:
                step, action = self._resignation.apply(step, action, np.asarray(out.root_value))
            self._episode_return += step.reward
            done = self._recorder.record(step, action, np.asarray(out.root_value), np.asarray(out.action_probs))
            if done:
                finished.extend(done)
                ended = np.flatnonzero(step.is_last)
                returns.extend(self._episode_return[ended].tolist())
                lengths.extend(len(t.action) for t in done)
            self._episode_return[step.is_last] = 0.0
            search_depth += float(np.mean(out.stats.max_depth))
            entropy += float(np.mean(out.stats.visit_entropy))
            t2 = time.perf_counter()
            self._step = self.env.step(action, step.is_last)
            self._last_action = action
            env_time += time.perf_counter() - t2
            act_time += t1 - t0
        self.env_steps += num_steps * self.num_envs
        self.episodes += len(finished)
        metrics = {
            "env_steps": float(self.env_steps),
            "episodes": float(self.episodes),
            "act_seconds": act_time,
            "env_seconds": env_time,
            "search_max_depth": search_depth / num_steps,
            "search_visit_entropy": entropy / num_steps,
        }
        if lengths:
            metrics["episode_length"] = float(np.mean(lengths))
            if not self.spec.is_two_player:
                metrics["episode_return"] = float(np.mean(returns))
        if self._resignation is not None:
            metrics.update(self._resignation.metrics())
        return RolloutResult(finished, metrics, policy_version, num_steps * self.num_envs)

    # --- checkpointing: everything needed to continue the same stream -----------------
    def state_dict(self) -> dict[str, np.ndarray]:
        state = {f"recorder/{k}": v for k, v in self._recorder.state_dict().items()}
        state["rng"] = np.asarray(jax.random.key_data(self._rng))
        state["history_frames"] = np.asarray(self._history.frames)
        state["history_actions"] = np.asarray(self._history.actions)
        state["last_action"] = self._last_action.copy()
        state["episode_return"] = self._episode_return.copy()
        state["counters"] = np.asarray([self.env_steps, self.episodes], np.int64)
        if self._resignation is not None:
            state.update({f"resign/{k}": v for k, v in self._resignation.state_dict().items()})
        env_state = getattr(self.env, "get_state", None)
        snapshot = env_state() if self._step is not None and env_state is not None else {}
        if snapshot:
            state.update({f"env/{k}": v for k, v in snapshot.items()})
            state.update({f"step/{name}": np.array(value) for name, value in self._step._asdict().items()})
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        from moozi.envs.base import StepOutput
        from moozi.history import HistoryState

        self._recorder.load_state_dict(
            {k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("recorder/")}
        )
        self._rng = jax.random.wrap_key_data(np.asarray(state["rng"]))
        self._history = HistoryState(
            frames=jax.numpy.asarray(state["history_frames"]), actions=jax.numpy.asarray(state["history_actions"])
        )
        self._last_action = np.asarray(state["last_action"], np.int32).copy()
        self._episode_return = np.asarray(state["episode_return"], np.float64).copy()
        self.env_steps, self.episodes = (int(x) for x in state["counters"])
        if self._resignation is not None:
            self._resignation.load_state_dict({k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("resign/")})
        env_keys = {k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("env/")}
        if env_keys and hasattr(self.env, "set_state"):
            self.env.set_state(env_keys)
            self._step = StepOutput(
                **{name: np.asarray(state[f"step/{name}"]) for name in StepOutput._fields}
            )
        else:
            # The env cannot restore its episodes: start fresh ones (documented in docs/training.md).
            self._step = None
            self._recorder = EpisodeRecorder(self.spec, self.num_envs)
            self._history = init_history(self.num_envs, self.config.targets.history_length, self.spec.obs_shape)
            self._last_action = np.zeros(self.num_envs, np.int32)
            self._episode_return[:] = 0.0

    def close(self) -> None:
        self.env.close()


class TestingRolloutWorker:
    """Greedy evaluation during training (thesis 5.2.14).

    One-player games: mean return over `episodes` episodes. Two-player games:
    win/draw/loss rate against a uniform-random player, half the games in
    each seat. Episodes run as one batch, each env until its first episode
    ends, so a test costs one batched search per step. Connect Four also
    measures the greedy move on a fixed subset of the solver-labelled
    positions (`test_solver_*`, `test_value_sign_accuracy`; moozi/solvers/).
    """

    __test__ = False  # a role, not a pytest test class (its name starts with Test)

    def __init__(self, config: Config):
        self.config = config
        self.spec = env_spec(config)
        self._act = make_acting(config, self.spec, greedy_planner_config(config.planner))
        self._needs_env_state = config.agent == "alphazero"
        self._positions = None
        if self.spec.name in CONNECT_FOUR_GAMES:
            # Read now, so a missing data file stops the run before training, not at its first test.
            self._positions = test_positions()
        self._position_evaluators = {}  # batch size -> PositionsEvaluator: inputs built once per size

    def run(self, params, episodes: int, seed: int) -> dict[str, float]:
        spec = self.spec
        env = make_vector_env(self.config, episodes, seed)
        try:
            rng = np.random.default_rng(seed)
            key = jax.random.key(seed)
            history = init_history(episodes, self.config.targets.history_length, spec.obs_shape)
            step = env.reset()
            last_action = np.zeros(episodes, np.int32)
            agent_seat = np.arange(episodes) % 2  # two-player games: alternate seats
            done = np.zeros(episodes, bool)
            total = np.zeros(episodes, np.float64)
            outcome = np.zeros(episodes, np.float64)  # two-player: +1 win, 0 draw, -1 loss for the agent
            steps = 0
            while not done.all() and steps < self.config.train.test_max_steps:
                key, sub = jax.random.split(key)
                env_state = env.state if self._needs_env_state else None
                history, out = self._act(params, history, step, last_action, env_state, sub)
                action = np.asarray(out.action, np.int32)
                if spec.is_two_player:
                    random_action = _random_legal(rng, step.legal_actions)
                    opponent_turn = step.to_play != agent_seat
                    action = np.where(opponent_turn & ~step.is_last, random_action, action)
                live = ~done
                total[live] += step.reward[live]
                ended = step.is_last & live
                if spec.is_two_player and ended.any():
                    # The reward belongs to the player who just acted: the one not to play now.
                    mover_is_agent = step.to_play != agent_seat
                    signed = np.where(mover_is_agent, step.reward, -step.reward)
                    outcome[ended] = np.sign(signed[ended])
                done |= step.is_last
                if done.all():
                    break
                step = env.step(action, step.is_last)
                last_action = action
                steps += 1
        finally:
            env.close()
        if spec.is_two_player:
            win_low, win_high = wilson_interval(int(np.sum(outcome > 0)), episodes)
            metrics = {
                "test_win_rate": float(np.mean(outcome > 0)),
                "test_win_rate_ci_low": win_low,  # 95% Wilson interval over the test's games
                "test_win_rate_ci_high": win_high,
                "test_draw_rate": float(np.mean(outcome == 0)),
                "test_loss_rate": float(np.mean(outcome < 0)),
            }
            if self._positions is not None:
                metrics.update(self._position_metrics(params, episodes, jax.random.key(seed)))
            return metrics
        return {"test_return": float(np.mean(total)), "test_return_std": float(np.std(total)),
                "test_cut_episodes": float(np.sum(~done))}

    def _position_metrics(self, params, batch_size: int, key) -> dict[str, float]:
        # Searched in batches of the test's own size: the acting program compiled for the test
        # games serves, and on a CPU k searches of B positions cost about one search of kB.
        if batch_size not in self._position_evaluators:
            self._position_evaluators[batch_size] = PositionsEvaluator(
                self.config, self.spec, self._act, self._positions, batch_size=batch_size
            )
        return self._position_evaluators[batch_size].evaluate(params, key).test_metrics()


def _random_legal(rng: np.random.Generator, legal_actions: np.ndarray) -> np.ndarray:
    """One uniformly random legal action per row (vectorised with Gumbel-max over the mask)."""
    noise = rng.random(legal_actions.shape)
    return np.argmax(np.where(legal_actions, noise, -1.0), axis=-1).astype(np.int32)


class ReanalyzeRolloutWorker:
    """Re-searches stored trajectories with the latest parameters (thesis 5.2.11, 5.2.15).

    Trajectories from the replay buffer are replayed step by step through a
    vectorized mock env (thesis 5.2.2-5.2.3) and the same jitted acting
    program as the training workers (history stacking + inference + search,
    root noise off); only the new v* and p* go back to the buffer.
    """

    def __init__(self, config: Config):
        from moozi.system.components import reanalyze_planner_config

        self.config = config
        self.spec = env_spec(config)
        self.num_envs = config.train.reanalyze_num_envs
        network = build_network(config, self.spec)
        self._act = make_act_fn(
            network, reanalyze_planner_config(config.planner), self.spec, config.targets.history_length
        )
        self._rng = seed_key(config.seed, 3)

    def run(self, params, trajectories: list[tuple[int, Trajectory]]) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(trajectory_id, trajectory) pairs -> (trajectory_id, new root_value [T], new action_probs [T, A])."""
        from moozi.envs.mock import MockVectorEnv, TrajectorySupply

        if not trajectories:
            return []
        ids = [trajectory_id for trajectory_id, _ in trajectories]
        supply = TrajectorySupply([trajectory for _, trajectory in trajectories])
        env = MockVectorEnv(supply, min(self.num_envs, len(trajectories)), self.spec)
        history = init_history(env.num_envs, self.config.targets.history_length, self.spec.obs_shape)
        step = env.reset()
        last_action = np.zeros(env.num_envs, np.int32)
        finished = []
        while True:
            self._rng, key = jax.random.split(self._rng)
            history, out = self._act(params, history, step, last_action, key)
            env.record(np.asarray(out.root_value), np.asarray(out.action_probs))
            # The stored actions, not the search's, drive the history: the trajectory is fixed.
            last_action = env.stored_actions()
            step = env.step(last_action, step.is_last)
            finished.extend(env.pop_finished(with_ids=True))
            if not env.active.any():  # every trajectory was re-searched and the supply is empty
                break
        return [(ids[index], t.root_value, t.action_probs) for index, t in finished]
