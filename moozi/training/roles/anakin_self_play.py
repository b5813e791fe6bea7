"""The training rollout worker of JAX-native games (pgx, gymnax): the Anakin path (thesis 3.9.6).

A thin shell around `moozi.training.anakin_segment.make_segment`: each `run` is one
call of the jitted self-play segment (env steps, history, search and step
samples for all B envs over T steps) and one device-to-host copy of its
[T, B] records, which the `EpisodeRecorder` cuts into trajectories. Same
interface, metrics and checkpoint contract as `TrainingRolloutWorker`;
`moozi.training.search_loop.training_worker_class` picks it for JAX-native games.
Epsilon-greedy exploration (`train.epsilon_*`) runs inside the segment;
resignation (`train.resign`) is host-path only and refused here.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from moozi.config import Config, epsilon_at
from moozi.core.acting import ActFn
from moozi.core.types import Trajectory, sub_state
from moozi.envs.base import EnvSpec, JaxEnv
from moozi.envs.registry import make_env
from moozi.errors import MooziError
from moozi.training.anakin_segment import AnakinCarry, init_carry, make_segment
from moozi.builders import env_key, env_options, env_spec, make_self_play_act, seed_key
from moozi.training.episodes import EpisodeRecorder, RolloutResult


def _program(config: Config):
    """The env, jitted segment and jitted start (`init_carry`) of a config's agent, shared by every
    worker in one process that plays the same game with the same act (`make_act` is memoized), so N
    inline workers (and tests) compile the segment once, not N times."""
    return _segment_program(*env_key(config), make_self_play_act(config, env_spec(config)))


@functools.lru_cache(maxsize=8)
def _segment_program(game: str, options: tuple, act: ActFn):
    env = make_env(game, **dict(options))
    return env, make_segment(env, act), _jit_init_carry(env)


def _jit_init_carry(env: JaxEnv):
    # Jitted per env, not once at module level with the env as a static argument: that cache would keep
    # a program for every env object a long-lived process ever built.
    return jax.jit(functools.partial(init_carry, env), static_argnums=(0, 1))


class AnakinRolloutWorker:
    """Generates training trajectories with exploration on, the whole self-play loop compiled.

    `act_fn` replaces the config's agent's acting; it must follow
    `moozi.core.acting.ActFn`.
    """

    def __init__(self, config: Config, worker_index: int = 0, act_fn: ActFn | None = None):
        if config.train.resign:
            raise MooziError(
                f"train.resign works on the host path only; {config.game} self-plays on the Anakin path (set train.resign=false)"
            )
        self.config = config
        self.worker_index = worker_index
        self.spec: EnvSpec = env_spec(config)
        self.num_envs = config.env.num_envs
        if act_fn is None:
            self.env, self._segment, start_carry = _program(config)
        else:
            self.env = make_env(config.game, **env_options(config))
            self._segment = make_segment(self.env, act_fn)
            start_carry = _jit_init_carry(self.env)
        # The same key path as the host worker's acting RNG; worker w plays other games than w' != w.
        init_key, self._rng = jax.random.split(seed_key(config.seed, 1, worker_index))
        self._carry: AnakinCarry = start_carry(self.num_envs, config.targets.history_length, init_key)
        self._recorder = EpisodeRecorder(self.spec, self.num_envs)
        self.env_steps = 0
        self.episodes = 0

    def run(self, params, num_steps: int, policy_version: int) -> RolloutResult:
        start = time.perf_counter()
        self._rng, key = jax.random.split(self._rng)
        epsilon = epsilon_at(self.config.train, self.env_steps)
        carry, records = self._segment(params, self._carry, key, np.float32(epsilon), num_steps=num_steps)
        records = jax.device_get(records)  # the segment's one device-to-host copy
        segment_seconds = time.perf_counter() - start
        self._carry = carry

        start = time.perf_counter()
        finished: list[Trajectory] = []
        for t in range(num_steps):
            finished.extend(
                self._recorder.record(
                    jax.tree.map(lambda x: x[t], records.step_output()),
                    records.action[t],
                    records.root_value[t],
                    records.action_probs[t],
                )
            )
        record_seconds = time.perf_counter() - start

        self.env_steps += num_steps * self.num_envs
        self.episodes += len(finished)
        metrics = {
            "env_steps": float(self.env_steps),
            "episodes": float(self.episodes),
            # Env steps run inside the segment: their time is part of act_seconds, none is spent on the host.
            "act_seconds": segment_seconds,
            "env_seconds": 0.0,
            "record_seconds": record_seconds,
            "search_max_depth": float(np.mean(records.stats.max_depth)),
            "search_visit_entropy": float(np.mean(records.stats.visit_entropy)),
        }
        if finished:
            metrics["episode_length"] = float(np.mean([len(t.action) for t in finished]))
            if not self.spec.is_two_player:
                metrics["episode_return"] = float(np.mean([t.reward.sum(dtype=np.float64) for t in finished]))
        return RolloutResult(finished, metrics, policy_version, num_steps * self.num_envs)

    # --- checkpointing: everything needed to continue the same stream -----------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """The RNG, counters, open episodes and the whole carry: every env's state pytree
        (leaf i as `carry/i`, in `jax.tree` order), the current step, history and last action."""
        state = {f"recorder/{k}": v for k, v in self._recorder.state_dict().items()}
        state["rng"] = np.asarray(jax.random.key_data(self._rng))
        state["counters"] = np.asarray([self.env_steps, self.episodes], np.int64)
        for i, leaf in enumerate(jax.tree.leaves(self._carry)):
            if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):  # e.g. an env's own RNG key
                leaf = jax.random.key_data(leaf)
            state[f"carry/{i}"] = np.asarray(leaf)
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        template, treedef = jax.tree.flatten(self._carry)
        stored = sum(1 for k in state if k.startswith("carry/"))
        if stored != len(template):
            raise MooziError(
                f"checkpoint holds {stored} env/acting arrays for {self.spec.name}, this version needs {len(template)}"
            )
        leaves = []
        for i, like in enumerate(template):
            value = np.asarray(state[f"carry/{i}"])
            if jnp.issubdtype(like.dtype, jax.dtypes.prng_key):
                leaves.append(jax.random.wrap_key_data(value, impl=jax.random.key_impl(like)))
                continue
            if value.shape != like.shape or value.dtype != like.dtype:
                raise MooziError(
                    f"checkpoint array carry/{i} is {value.dtype}{list(value.shape)}, "
                    f"{self.spec.name} with env.num_envs={self.num_envs} needs {like.dtype}{list(like.shape)}"
                )
            leaves.append(jnp.asarray(value))
        self._carry = jax.tree.unflatten(treedef, leaves)
        self._rng = jax.random.wrap_key_data(np.asarray(state["rng"]))
        self.env_steps, self.episodes = (int(x) for x in state["counters"])
        self._recorder.load_state_dict(
            sub_state(state, "recorder/")
        )

    def close(self) -> None:
        self._carry = None
