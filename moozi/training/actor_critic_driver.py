"""The driver of the model-free agents (agent=ppo, agent=impala): it runs the agent's loop (the Anakin
loop, moozi/agents/actor_critic/anakin.py, for JAX-native games; for host games the host loop,
moozi/training/actor_critic_host.py, whose rollout workers run inline or as Ray actors) and gives it what every moozi run has: the run directory with its config, metrics.jsonl
and TensorBoard logs, in-training tests, checkpoints that resume exactly, the best checkpoint,
stopping rules and signals, and the end-of-run summary.

Each iteration is one rollout of B x T env steps and the agent's update on it (`updates_per_rollout`
optimizer steps); in the host loop's asynchronous mode (`impala.asynchronous`), one worker's share of
the B envs. Checkpoints are taken between iterations; they hold the learner's state, the
acting parameters, the key, and the envs' state (the Anakin carry, or the host envs' snapshots), so
a resumed run continues bit for bit where the stopped one was (the asynchronous mode, whose order
follows timing, only continues).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
import time

import numpy as np

from moozi._version import __version__
from moozi.builders import env_spec, make_actor_critic_learner, make_anakin_actor_critic
from moozi.envs.registry import is_jax_native
from moozi.config import Config, resolve_rollout_workers, save_config
from moozi.errors import MooziError
from moozi.runs.checkpoint import best_checkpoint, latest_checkpoint, load_checkpoint, save_best_checkpoint, save_checkpoint
from moozi.runs.metrics_log import MetricsLogger
from moozi.runs.run_dir import prepare_run_dir, resumed_config
from moozi.runs.summary import write_summary
from moozi.builders import is_asynchronous
from moozi.training.actor_critic_host import AsynchronousHostTrainer, HostTrainer
from moozi.training.backends import make_backend
from moozi.training.best_checkpoint import next_best, strength_score
from moozi.training.counters import Counters
from moozi.training.device import select_device
from moozi.training.metrics_window import MetricsWindow, print_progress
from moozi.training.roles.actor_critic import envs_per_worker
from moozi.training.stopping import StopRequests, limit_reached, run_until_stopped


def _even_workers(config: Config, auto: bool, num_envs: int) -> Config:
    """With "auto" workers, the most (at most as many as fit) that split the B envs evenly."""
    workers = config.train.num_training_workers
    if auto:
        workers = max(w for w in range(1, min(workers, num_envs) + 1) if num_envs % w == 0)
    return dataclasses.replace(config, train=dataclasses.replace(config.train, num_training_workers=workers))


class ActorCriticDriver:
    def __init__(self, config: Config, run_dir: str | pathlib.Path, *, resume: bool = False, progress: bool = True):
        self.run_dir = pathlib.Path(run_dir)
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
        # Before the learner builds its parameters: they are made on the default device (moozi/training/device.py).
        self.device = select_device(config.backend)
        prepare_run_dir(self.run_dir, resume)
        if resume:
            config = resumed_config(self.run_dir, config)
        self.config, self.spec, self.progress = config, spec, progress
        if is_jax_native(config.game):
            self.config = config = resolve_rollout_workers(config, 1.0)  # the Anakin loop has no workers
            save_config(config, self.run_dir / "config.json")
            self.trainer = make_anakin_actor_critic(config, spec)
        else:
            backend = make_backend(config.backend.kind, config.backend)
            try:
                learner = make_actor_critic_learner(config, spec)
                self.config = config = _even_workers(resolve_rollout_workers(config, backend.cpus()),
                                                     auto=config.train.num_training_workers == "auto",
                                                     num_envs=learner.num_envs)
                if is_asynchronous(config):  # each update learns from one worker's rollout
                    learner = make_actor_critic_learner(config, spec, envs_per_worker(config, learner.num_envs))
                save_config(config, self.run_dir / "config.json")
            except BaseException:
                backend.shutdown()
                raise
            trainer = AsynchronousHostTrainer if is_asynchronous(config) else HostTrainer
            self.trainer = trainer(config, spec, learner, backend)
        self.counters = Counters()
        self._stops = StopRequests(config.train)
        if hasattr(self.trainer, "_backend"):  # the host loop's roles: their waits give up on a stop request
            self.trainer._backend.interrupt = self._stops.interrupt_reason
        self._best: dict | None = None
        self._last_test: dict | None = None
        resume_step = self._restore() if resume else None
        self.logger = MetricsLogger(self.run_dir, resume_from_step=-1 if resume_step is None else resume_step)

    # --- checkpoints -----------------------------------------------------------------------
    def _meta(self) -> dict:
        return {"game": self.spec.name, "agent": self.config.agent, "moozi_version": __version__,
                "counters": dataclasses.asdict(self.counters)}

    def checkpoint(self) -> pathlib.Path:
        return save_checkpoint(self.run_dir, self.counters.updates, train_state=self.trainer.learner_tree(),
                               arrays=self.trainer.state_arrays(), meta=self._meta(),
                               keep=self.config.train.keep_checkpoints)

    def _restore(self) -> int | None:
        path = latest_checkpoint(self.run_dir)
        if path is None and not any(self.run_dir.glob("checkpoints/ckpt-*")):
            print(f"{self.run_dir} has no checkpoint yet: starting from the beginning", file=sys.stderr)
            return None
        if path is None:
            raise MooziError(f"cannot resume: {self.run_dir} has no complete checkpoint")
        tree, arrays, meta = load_checkpoint(path, train_state_template=self.trainer.learner_tree(),
                                             expected_meta={"game": self.spec.name})
        self.trainer.set_learner_tree(tree)
        self.trainer.load_state_arrays(arrays)
        self.counters = Counters.from_meta(meta)
        best = best_checkpoint(self.run_dir)
        if best is not None:
            self._best = json.loads((best / "meta.json").read_text()).get("best")
        return self.counters.updates

    # --- the loop --------------------------------------------------------------------------
    def run(self) -> dict:
        """Iterations until a stop condition; returns the last metrics, the stop reason and the counters."""
        return run_until_stopped(self)

    def _summary_facts(self) -> dict:
        best = best_checkpoint(self.run_dir)
        train = self.config.train
        return {"run_dir": str(self.run_dir), "game": self.spec.name, "game_arg": self.config.game,
                "agent": self.config.agent, "device": self.device, "two_player": False, "last_test": self._last_test,
                "best_checkpoint": None if best is None else str(best),
                "test_episodes": train.test_episodes, "test_max_steps": train.test_max_steps}

    def _run(self, started: float) -> dict:
        counters, train = self.counters, self.config.train
        elapsed_before = counters.elapsed_seconds
        last_checkpoint = time.monotonic()
        next_test = (counters.updates // train.test_every_updates + 1) * train.test_every_updates if train.test_every_updates else None
        window, last_metrics = MetricsWindow(), {}
        while (reason := self._stops.reason or limit_reached(train, counters, started)) is None:
            metrics = self.trainer.iteration()
            counters.iteration += 1
            counters.updates = int(metrics.pop("updates"))
            counters.env_steps = int(metrics.pop("env_steps"))
            counters.episodes += int(metrics["episodes"])
            window.add_iteration(metrics, self.trainer.num_envs * self.trainer.rollout_steps, self.trainer.updates_per_rollout)
            if next_test is not None and counters.updates >= next_test:
                self._test(last_metrics)
                next_test = (counters.updates // train.test_every_updates + 1) * train.test_every_updates
            if window.updates >= train.log_every_updates:
                self._log(window, started, elapsed_before, last_metrics)
                window = MetricsWindow()
            if time.monotonic() - last_checkpoint >= 60 * train.checkpoint_every_minutes:
                counters.elapsed_seconds = elapsed_before + time.monotonic() - started
                self.checkpoint()
                last_checkpoint = time.monotonic()
        if window.updates:
            self._log(window, started, elapsed_before, last_metrics)
        counters.elapsed_seconds = elapsed_before + time.monotonic() - started
        path = self.checkpoint()
        if self.progress:
            print(file=sys.stderr)
        self.logger.flush()
        summary = {**last_metrics, "stop_reason": reason, "checkpoint": str(path), **dataclasses.asdict(counters),
                   **self._summary_facts()}
        write_summary(self.run_dir, summary)
        return summary

    def _test(self, last_metrics: dict) -> None:
        """The sampled policy over `test_episodes` fresh episodes, each cut after `test_max_steps`."""
        train, counters = self.config.train, self.counters
        returns = self.trainer.evaluate(train.test_episodes, seed=self.config.seed + 7919 * counters.tests,
                                        max_steps=train.test_max_steps)
        counters.tests += 1
        test_metrics = {"test_return": float(np.mean(returns)), "test_return_std": float(np.std(returns))}
        self._last_test = {"update": counters.updates, **test_metrics}
        self.logger.write(counters.updates, test_metrics, role="test")
        last_metrics.update(test_metrics)
        if train.keep_best:
            name, score, se = strength_score(test_metrics, train.test_episodes)
            best = next_best(self._best, name, score, se, counters.updates)
            if best is not None:
                self._best = best
                save_best_checkpoint(self.run_dir, counters.updates, train_state=self.trainer.learner_tree(),
                                     meta={**self._meta(), "best": best, "test_metrics": test_metrics})

    def _log(self, window: MetricsWindow, started: float, elapsed_before: float, last_metrics: dict) -> None:
        metrics = window.summary(self.counters, searches=False)
        # Updates between acting and learning: fixed, or the window's mean when the queue measures it.
        metrics.setdefault("policy_lag", float(self.trainer.learner.policy_lag))
        self.logger.write(self.counters.updates, metrics)
        last_metrics.update(metrics)
        if self.progress:
            print_progress(elapsed_before + time.monotonic() - started, self.counters, last_metrics)

    def close(self) -> None:
        close = getattr(self.trainer, "close", None)
        if close is not None:
            close()

