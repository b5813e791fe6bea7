"""The training rollout worker (thesis 5.2.13): self-play with exploration on, over host envs.

It holds B envs, a history state and the jitted acting of the config's agent,
and returns finished trajectories when the training loop (`SearchLoop`,
moozi/training/search_loop.py) calls `run`; it never loops on its own
(centralised control, thesis 5.2.1). JAX-native games self-play in one
compiled program instead (anakin_self_play.py).
"""

from __future__ import annotations

import time

import jax
import numpy as np

from moozi.builders import env_spec, make_self_play_act, make_vector_env, searches_env_state, seed_key
from moozi.config import Config, epsilon_at
from moozi.core.history import HistoryState, init_history
from moozi.core.types import Trajectory, sub_state
from moozi.envs.base import EnvSpec, StepOutput, random_legal_actions
from moozi.training.episodes import EpisodeRecorder, RolloutResult
from moozi.training.resignation import SelfPlayResignation
from moozi.training.selfplay_passes import SelfPlayPassRule


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
        # jax.jit caches by the function it wraps: without playout cap randomisation this is make_acting's program.
        self._act = jax.jit(make_self_play_act(config, self.spec))
        self._needs_env_state = searches_env_state(config)
        self._rng = seed_key(config.seed, 1, worker_index)
        self._history = init_history(self.num_envs, config.targets.history_length, self.spec.obs_shape)
        self._recorder = EpisodeRecorder(self.spec, self.num_envs)
        self._step = None
        self._last_action = np.zeros(self.num_envs, np.int32)
        self._episode_return = np.zeros(self.num_envs, np.float64)
        self._resignation = (
            SelfPlayResignation(config.train, self.spec, self.num_envs, self.env_seed) if config.train.resign else None
        )
        self._pass_rule = (
            SelfPlayPassRule(self.spec, self.num_envs, config.train.no_pass_before_move)
            if config.train.no_pass_before_move else None
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
            env_state = self.env.state if self._needs_env_state else None
            step = self._step
            if self._pass_rule is not None:
                step = self._pass_rule.restrict(step, self._last_action)
            self._history, out = self._act(params, self._history, step, self._last_action, env_state, key)
            action = np.asarray(out.action, np.int32)
            t1 = time.perf_counter()
            epsilon = epsilon_at(self.config.train, self.env_steps)
            if epsilon > 0:
                # Derived from the step's key, so a resumed worker draws the same moves.
                rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
                explore = (rng.random(self.num_envs) < epsilon) & ~step.is_last
                action = np.where(explore, random_legal_actions(rng, step.legal_actions), action).astype(np.int32)
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
        if self._pass_rule is not None:
            state.update({f"pass_rule/{k}": v for k, v in self._pass_rule.state_dict().items()})
        env_state = getattr(self.env, "get_state", None)
        snapshot = env_state() if self._step is not None and env_state is not None else {}
        if snapshot:
            state.update({f"env/{k}": v for k, v in snapshot.items()})
            state.update({f"step/{name}": np.array(value) for name, value in self._step._asdict().items()})
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self._recorder.load_state_dict(
            sub_state(state, "recorder/")
        )
        self._rng = jax.random.wrap_key_data(np.asarray(state["rng"]))
        self._history = HistoryState(
            frames=jax.numpy.asarray(state["history_frames"]), actions=jax.numpy.asarray(state["history_actions"])
        )
        self._last_action = np.asarray(state["last_action"], np.int32).copy()
        self._episode_return = np.asarray(state["episode_return"], np.float64).copy()
        self.env_steps, self.episodes = (int(x) for x in state["counters"])
        if self._resignation is not None:
            self._resignation.load_state_dict(sub_state(state, "resign/"))
        if self._pass_rule is not None and "pass_rule/moves" in state:
            self._pass_rule.load_state_dict(sub_state(state, "pass_rule/"))
        env_keys = sub_state(state, "env/")
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
