"""The training loop of the model-free agents (agent=ppo, agent=impala), as `Driver` (driver.py) runs it:
the Anakin loop (moozi/actor_critic/anakin_loop.py) for JAX-native games, one jitted program in one
process; for host games the host loop (actor_critic_host_loop.py), whose rollout workers run inline or as
Ray actors.

Each iteration is one rollout of B x T env steps and the agent's update on it (`updates_per_rollout`
optimizer steps); in the host loop's asynchronous mode (`impala.asynchronous`), one worker's share of
the B envs. A checkpoint holds the learner's state, the acting parameters, the key, and the envs' state
(the Anakin carry, or the host envs' snapshots), so a resumed run continues bit for bit where the
stopped one was (the asynchronous mode, whose order follows timing, only continues).
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable

import numpy as np

from moozi.builders import env_spec, is_asynchronous, make_actor_critic_learner, make_anakin_actor_critic
from moozi.config import Config, resolve_rollout_workers, save_config
from moozi.envs.registry import is_jax_native
from moozi.errors import MooziError
from moozi.training.actor_critic_host_loop import AsynchronousHostTrainer, HostTrainer
from moozi.training.backends import make_backend
from moozi.training.counters import Counters
from moozi.training.loop import TestCall
from moozi.training.metrics_window import MetricsWindow
from moozi.training.roles.actor_critic import envs_per_worker


class ActorCriticLoop:
    """An actor-critic's trainer (`AnakinTrainer`, `HostTrainer` or `AsynchronousHostTrainer`) behind the
    interface every loop gives the driver."""

    searches = False
    tests_in_background = False  # the test runs at once, between two iterations

    @staticmethod
    def check_before_run_dir(config: Config, resume: bool) -> None:
        """Settings the loop cannot run, refused before anything is written."""
        if config.backend.kind != "inline" and is_jax_native(config.game):
            raise MooziError(f"agent={config.agent} on {config.game} runs the Anakin loop, one jitted program in "
                             "one process: use backend.kind=inline (the Ray backend serves host games)")
        if is_jax_native(config.game) and is_asynchronous(config):
            raise MooziError(f"impala.asynchronous=true needs a host game: {config.game} runs the Anakin loop, "
                             "synchronous by construction (impala.policy_lag sets its lag)")
        spec = env_spec(config)  # a misspelt game fails here, before the run directory is made
        if spec.is_two_player:
            raise MooziError(f"agent={config.agent} plays one-player games; {config.game} has two players "
                             "(train it with agent=muzero or agent=alphazero)")

    def __init__(self, config: Config, run_dir: pathlib.Path, *, interrupt: Callable[[], str | None], resume: bool):
        self.spec = spec = env_spec(config)
        self.backend = None
        if is_jax_native(config.game):
            config = resolve_rollout_workers(config, 1.0)  # the Anakin loop has no workers
            save_config(config, run_dir / "config.json")
            self.trainer = make_anakin_actor_critic(config, spec)
        else:
            backend = make_backend(config.backend.kind, config.backend)
            try:
                learner = make_actor_critic_learner(config, spec)
                config = _even_workers(resolve_rollout_workers(config, backend.cpus()),
                                       auto=config.train.num_training_workers == "auto", num_envs=learner.num_envs)
                if is_asynchronous(config):  # each update learns from one worker's rollout
                    learner = make_actor_critic_learner(config, spec, envs_per_worker(config, learner.num_envs))
                save_config(config, run_dir / "config.json")
            except BaseException:
                backend.shutdown()
                raise
            # The roles' waits give up on a stop request.
            backend.interrupt = interrupt
            self.backend = backend
            trainer = AsynchronousHostTrainer if is_asynchronous(config) else HostTrainer
            self.trainer = trainer(config, spec, learner, backend)
        self.config = config
        self.log_event: Callable[[dict], None] = lambda row: None

    def get(self, value):
        return value  # tests run at once: their results are values

    # --- checkpoints -------------------------------------------------------------------------
    def train_state(self) -> dict:
        return self.trainer.learner_tree()

    def state_arrays(self) -> dict[str, np.ndarray]:
        return self.trainer.state_arrays()

    def restore(self, train_state: dict, arrays: dict) -> None:
        self.trainer.set_learner_tree(train_state)
        self.trainer.load_state_arrays(arrays)

    # --- one iteration -----------------------------------------------------------------------
    def iteration(self, counters: Counters, window: MetricsWindow, run_progress: float) -> bool:
        """One rollout and its update; always ready (no buffer to fill)."""
        metrics = self.trainer.iteration()
        counters.updates = int(metrics.pop("updates"))
        counters.env_steps = int(metrics.pop("env_steps"))
        counters.episodes += int(metrics["episodes"])
        window.add_iteration(metrics, self.trainer.num_envs * self.trainer.rollout_steps, self.trainer.updates_per_rollout)
        return True

    def log_metrics(self, window: MetricsWindow, counters: Counters) -> dict:
        metrics = window.summary(counters, searches=False)
        # Updates between acting and learning: fixed, or the window's mean when the queue measures it.
        metrics.setdefault("policy_lag", float(self.trainer.learner.policy_lag))
        return metrics

    # --- the in-training test ----------------------------------------------------------------
    def launch_test(self, seed: int, keep_state: bool) -> TestCall:
        """The sampled policy over `test_episodes` fresh episodes, each cut after `test_max_steps`."""
        train = self.config.train
        returns = self.trainer.evaluate(train.test_episodes, seed=seed, max_steps=train.test_max_steps)
        metrics = {"test_return": float(np.mean(returns)), "test_return_std": float(np.std(returns))}
        return TestCall(metrics, self.trainer.learner_tree() if keep_state else None)

    def cancel_test(self) -> None:
        pass  # its tests run when launched: none is ever in flight

    def close(self, test_in_flight: bool) -> None:
        close = getattr(self.trainer, "close", None)
        if close is not None:
            close()


def _even_workers(config: Config, auto: bool, num_envs: int) -> Config:
    """With "auto" workers, the most (at most as many as fit) that split the B envs evenly."""
    workers = config.train.num_training_workers
    if auto:
        workers = max(w for w in range(1, min(workers, num_envs) + 1) if num_envs % w == 0)
    return dataclasses.replace(config, train=dataclasses.replace(config.train, num_training_workers=workers))
