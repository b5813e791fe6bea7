"""After warm-up, a training rollout worker and a learner update never compile again (issue 5).

A recompilation inside the loop costs seconds per call on CPU and hides in the
throughput numbers, so every compiled program of acting and learning must be
found in JAX's cache from the second call on: new parameter versions, episode
ends and resets included. Compilations are counted with JAX's compile log
(`jax_log_compiles`): one "Compiling <module>" record per jit cache miss, made
before the persistent compilation cache is asked, so a persistent-cache hit
still counts.
"""

from __future__ import annotations

import pytest
import contextlib
import logging

import jax
import jax.numpy as jnp

from tests.helpers.tiny import tiny_config

from moozi.training.roles.parameter_optimizer import ParameterOptimizer
from moozi.training.roles.replay_buffer import ReplayRole
from moozi.training.roles.self_play import TrainingRolloutWorker

_COMPILE_LOGGER = "jax._src.interpreters.pxla"


class _CompileRecorder(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.modules: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("Compiling %s") and record.args:
            self.modules.append(str(record.args[0]))


@contextlib.contextmanager
def compilations():
    """Yields the list of modules compiled inside the block."""
    recorder = _CompileRecorder()
    logger = logging.getLogger(_COMPILE_LOGGER)
    previous = jax.config.jax_log_compiles
    jax.config.update("jax_log_compiles", True)
    logger.addHandler(recorder)
    try:
        yield recorder.modules
    finally:
        logger.removeHandler(recorder)
        jax.config.update("jax_log_compiles", previous)


def test_the_counter_sees_a_new_shape_compile():
    double = jax.jit(lambda x: 2 * x)
    three, five = jnp.ones(3), jnp.ones(5)  # made outside: creating them compiles too
    double(three)
    with compilations() as compiled:
        double(three)
        assert compiled == []
        double(five)
    assert len(compiled) == 1 and "lambda" in compiled[0]


@pytest.mark.slow
def test_rollout_worker_and_learner_do_not_recompile_after_warm_up():
    config = tiny_config()
    worker = TrainingRolloutWorker(config)
    optimizer = ParameterOptimizer(config)
    replay = ReplayRole(config)
    batch_size = config.train.batch_size
    try:
        # Warm-up: the first reset, ordinary steps and (within 12 steps) every env's first
        # episode end and automatic reset; then one learner call.
        replay.add_rollouts([worker.run(optimizer.get_params(), 12, 0)])
        assert len(replay.buffer) > 0
        replay.update_priorities(optimizer.update(replay.sample_batches(2, batch_size)))
        episodes_after_warm_up = worker.episodes
        with compilations() as compiled:
            for version in range(1, 4):
                params = optimizer.get_params()  # a new parameter version each time, as the driver sends
                result = worker.run(params, config.train.rollout_steps, version)
                replay.add_rollouts([result])
                update = optimizer.update(replay.sample_batches(config.train.updates_per_iteration, batch_size))
                replay.update_priorities(update)
        assert optimizer.version == 2 + 3 * config.train.updates_per_iteration
        assert worker.episodes > episodes_after_warm_up  # the calls after warm-up crossed episode ends too
    finally:
        worker.close()
    assert compiled == [], f"recompiled after warm-up: {compiled}"
