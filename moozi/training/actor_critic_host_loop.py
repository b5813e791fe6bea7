"""The host loop of an actor-critic (agent=ppo, agent=impala on MinAtar, Atari, Gymnasium): training
rollout workers (moozi/training/roles/actor_critic.py) step the envs, inline or as Ray actors, and
the update runs in the driver's process.

Schedule (Cleanba 4.2, synchronous). With a policy lag of 1, iteration i launches the workers on
parameter version v_{i-1} and, while they play, updates on the rollout of iteration i-1 (played by
v_{i-2}) to make v_i: the learner always trains on data one version old, and acting and learning
overlap. With a lag of 0 each rollout is played by the latest parameters and updated on at once.
Every rollout, key and version is fixed by the seed and the iteration, so the inline and Ray backends
give the same metrics. The rollout waiting for its update is part of the checkpoint.

Asynchronous (`impala.asynchronous`, IMPALA's actor-learner split): `AsynchronousHostTrainer` below.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from moozi.actor_critic.learner import Learner
from moozi.actor_critic.rollout import Rollout
from moozi.actor_critic.trainer_state import TrainerState
from moozi.config import TESTING_WORKER_CPUS, Config
from moozi.envs.base import EnvSpec
from moozi.training.roles.actor_critic import ActorCriticRolloutWorker, ActorCriticTestingWorker


class HostTrainer(TrainerState):
    def __init__(self, config: Config, spec: EnvSpec, learner: Learner, backend):
        super().__init__(learner, spec.obs_shape, config.seed)
        b = config.backend
        self._backend = backend
        self.workers = [
            backend.start(f"training_rollout_worker_{i}", ActorCriticRolloutWorker, config, i,
                          resources={"num_cpus": b.rollout_worker_cpus, "num_gpus": b.rollout_worker_gpus}, group="rollout")
            for i in range(config.train.num_training_workers)
        ]
        self.tester = backend.start("testing_rollout_worker", ActorCriticTestingWorker, config,
                                    resources={"num_cpus": TESTING_WORKER_CPUS})
        try:
            backend.launch()  # every role placed at once, or a message saying what they ask for
        except BaseException:
            backend.shutdown()
            raise
        self._update = jax.jit(learner.update)
        self.pending: Rollout | None = None  # lag 1: the last rollout, waiting for its update

    def iteration(self) -> dict[str, float]:
        self._key, key = jax.random.split(self._key)
        rollout_key, update_key = jax.random.split(key)
        params = self._backend.put(self.acting_params)
        futures = [w.call(ActorCriticRolloutWorker.rollout, params, jax.random.fold_in(rollout_key, i))
                   for i, w in enumerate(self.workers)]
        metrics: dict = {}
        if self.learner.policy_lag and self.pending is not None:
            metrics = self._learn(self.pending, update_key)  # overlaps the workers' rollouts
        results = self._backend.get(futures)
        rollout = Rollout(*(_join([r[0][k] for r in results], name) for k, name in enumerate(Rollout._fields)))
        finished = np.concatenate([r[1] for r in results])
        self.env_steps += self.num_envs * self.rollout_steps
        if self.learner.policy_lag:
            self.pending = rollout
        else:
            metrics = self._learn(rollout, update_key)
        self.acting_params = self.state.params
        return self._report(metrics, finished)

    def _learn(self, rollout: Rollout, key) -> dict:
        self.state, metrics = self._update(self.state, rollout, key)
        self.updates += self.updates_per_rollout
        return jax.device_get(metrics)

    def _report(self, metrics: dict, finished: np.ndarray) -> dict[str, float]:
        out = {k: float(v) for k, v in metrics.items()}
        out["episodes"] = float(len(finished))
        out["episode_return"] = float(finished.mean()) if len(finished) else float("nan")
        out.update(env_steps=self.env_steps, updates=self.updates)
        return out

    def evaluate(self, episodes: int, *, seed: int = 0, greedy: bool = False, max_steps: int = 5_000) -> np.ndarray:
        return self._backend.get(self.tester.call(ActorCriticTestingWorker.run, self.state.params, episodes, seed,
                                                  max_steps, greedy))

    # --- checkpoints: the workers' envs and the pending rollout -----------------------------
    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = {"key": np.asarray(jax.device_get(self._key)),
                  "counters": np.asarray([self.env_steps, self.updates], np.int64)}
        states = self._backend.get([w.call(ActorCriticRolloutWorker.state_dict) for w in self.workers])
        for i, state in enumerate(states):
            arrays.update({f"worker{i}/{k}": v for k, v in state.items()})
        if self.pending is not None:
            arrays.update({f"pending/{name}": np.asarray(v) for name, v in self.pending._asdict().items()})
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self._key = jax.numpy.asarray(arrays["key"])
        self.env_steps, self.updates = (int(x) for x in arrays["counters"])
        for i, worker in enumerate(self.workers):
            prefix = f"worker{i}/"
            state = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            self._backend.get(worker.call(ActorCriticRolloutWorker.load_state_dict, state))
        if "pending/obs" in arrays:
            self.pending = Rollout(**{name: arrays[f"pending/{name}"] for name in Rollout._fields})

    def close(self) -> None:
        for handle in [*self.workers, self.tester]:
            if self._backend.kind == "inline":
                handle.drain()
                close = getattr(handle.obj, "close", None)
                if close:
                    close()
        self._backend.shutdown()


class _Launch(NamedTuple):
    worker: int  # the training rollout worker's index
    version: int  # the policy version (updates so far) whose parameters play the rollout
    future: Any  # its (rollout, returns of the episodes that ended in it)


class AsynchronousHostTrainer(HostTrainer):
    """IMPALA's actor-learner split. Every training rollout worker always has one rollout in flight; each
    iteration the learner takes the first to finish (among several finished, the one launched first),
    updates on it, and launches that worker again with the new parameters. V-trace corrects the lag,
    which each update reports as `policy_lag`: its policy version less the one that played the rollout.
    The learner is built for one worker's share of the B envs, the batch it updates on.

    Which rollout finishes first depends on timing, so runs are not reproducible, except with the
    unthreaded inline backend, where every call finishes at once and the workers take turns. A
    checkpoint waits for the rollouts in flight and keeps them, with their versions, as the queue that
    a resumed run learns from first."""

    def __init__(self, config: Config, spec: EnvSpec, learner: Learner, backend):
        super().__init__(config, spec, learner, backend)
        self.queue: list[_Launch] = []  # the rollouts in flight, the first launched first

    def iteration(self) -> dict[str, float]:
        idle = set(range(len(self.workers))) - {launch.worker for launch in self.queue}
        for worker in sorted(idle):  # the first iteration, or a checkpoint without every worker's rollout
            self._launch(worker)
        index, (rollout, finished) = self._backend.get_first([launch.future for launch in self.queue])
        launch = self.queue.pop(index)
        lag = self.updates - launch.version
        self._key, update_key = jax.random.split(self._key)
        metrics = self._learn(rollout, update_key)
        self.acting_params = self.state.params
        self._launch(launch.worker)
        self.env_steps += self.num_envs * self.rollout_steps
        return {**self._report(metrics, finished), "policy_lag": float(lag)}

    def _launch(self, worker: int) -> None:
        self._key, key = jax.random.split(self._key)
        future = self.workers[worker].call(ActorCriticRolloutWorker.rollout, self._backend.put(self.acting_params), key)
        self.queue.append(_Launch(worker, self.updates, future))

    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = super().state_arrays()
        results = self._backend.get([launch.future for launch in self.queue])
        for j, (launch, (rollout, finished)) in enumerate(zip(self.queue, results)):
            arrays.update({f"queue{j}/{name}": np.asarray(v) for name, v in rollout._asdict().items()})
            arrays.update({f"queue{j}/worker": np.asarray(launch.worker), f"queue{j}/version": np.asarray(launch.version),
                           f"queue{j}/finished": np.asarray(finished)})
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        super().load_state_arrays(arrays)
        self.queue = []
        while f"queue{len(self.queue)}/worker" in arrays:
            prefix = f"queue{len(self.queue)}/"
            rollout = Rollout(**{name: arrays[prefix + name] for name in Rollout._fields})
            result = self._backend.put((rollout, arrays[prefix + "finished"]))  # a finished future
            self.queue.append(_Launch(int(arrays[prefix + "worker"]), int(arrays[prefix + "version"]), result))


def _join(parts: list[np.ndarray], name: str) -> np.ndarray:
    """The workers' shares of one Rollout field, joined on the env axis ([T, B, ...], or [B, ...] for next_*)."""
    return np.concatenate(parts, axis=0 if name.startswith("next_") else 1)
