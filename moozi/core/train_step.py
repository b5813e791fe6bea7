"""The parameter update (thesis 5.2.10): Adam with global-norm clipping, a
learning-rate schedule and a target network, refreshed by a periodic copy or kept as an
exponential moving average of the online parameters (Polyak averaging).

`make_train_step` returns one jitted program (state, batch, rng) -> (state,
metrics, new_priorities); the learner shell around it only moves data.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import flax.struct
import jax
import jax.numpy as jnp
import optax

from moozi.core.loss import LossConfig, loss_fn
from moozi.core.network import Network
from moozi.core.types import Array, TrainingTarget
from moozi.errors import MooziError


SCHEDULES = ("constant", "cosine")
DECAY_OVER = ("updates", "run")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """Adam, clipping, schedule and target network of the parameter optimizer."""

    learning_rate: float = 1e-3  # peak learning rate, reached at the end of the warm-up
    warmup_steps: int = 200  # linear warm-up from 0 to learning_rate over this many updates (0: none)
    schedule: str = "constant"  # after the warm-up: "constant", or "cosine" decay over decay_steps
    decay_steps: int = 100_000  # cosine, decay_over="updates": updates from the end of the warm-up to the final rate
    # cosine: what the decay runs over. "updates": decay_steps updates, so a machine twice as fast
    # reaches the final rate in half the hour. "run": the run's planned length, the larger of the
    # shares of train.max_env_steps and train.max_minutes done (this invocation's minutes, as the
    # stopping rule counts them), so every machine ends its run at the final rate; without either
    # limit the rate stays at its peak (the driver says so).
    decay_over: str = "updates"
    final_learning_rate_fraction: float = 0.0  # cosine: final rate as a fraction of learning_rate
    # cosine, decay_over="run": the share of the run held at the peak before the cosine starts; the
    # cosine then runs over the rest (0: over the whole run). A rate held up while the agent's data
    # still changes, and decayed at the end, as warmup-stable-decay schedules do.
    decay_start: float = 0.0
    max_grad_norm: float = 5.0  # global-norm clipping threshold (Pascanu et al.)
    adam_b1: float = 0.9  # Adam's first-moment decay
    adam_b2: float = 0.999  # Adam's second-moment decay
    adam_eps: float = 1e-8  # Adam's denominator epsilon
    # Decoupled weight decay (AdamW, Loshchilov & Hutter 2019): every update also takes rate x
    # weight_decay x w off each kernel, outside Adam's normalisation, so the shrinking follows the
    # schedule and the weight's size. The loss's L2 term (loss.l2_coef) instead passes through Adam,
    # which rescales it per parameter: behind batch norm, where a kernel's scale does not change the
    # output, that shrinks the kernels at a near-constant pace and so enlarges each later step
    # relative to them. Biases and normalisation parameters are not decayed. 0: plain Adam.
    weight_decay: float = 0.0
    target_update_period: int = 100  # T: the target network copies the online network every T updates
    # d: 0 keeps the periodic copy; in (0, 1) the target moves to d·target + (1 - d)·online after every
    # update instead (Polyak averaging over ~1/(1 - d) updates; target_update_period is then unused).
    # An average of the recent parameters moves less from one checkpoint to the next than the online
    # network, which is why `train.agent_network="target"` can play it (docs/training.md).
    target_ema_decay: float = 0.0

    def __post_init__(self):
        if self.schedule not in SCHEDULES:
            raise MooziError(f"optimizer.schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.decay_over not in DECAY_OVER:
            raise MooziError(f"optimizer.decay_over must be one of {DECAY_OVER}, got {self.decay_over!r}")
        if self.target_update_period < 1:
            raise MooziError(f"optimizer.target_update_period must be >= 1, got {self.target_update_period}")
        if not 0.0 <= self.target_ema_decay < 1.0:
            raise MooziError(f"optimizer.target_ema_decay must be in [0, 1), got {self.target_ema_decay!r}")
        if not 0.0 <= self.decay_start < 1.0:
            raise MooziError(f"optimizer.decay_start must lie in [0, 1) (a share of the run), got {self.decay_start!r}")
        if self.decay_start > 0.0 and not decays_over_run(self):
            raise MooziError("optimizer.decay_start needs optimizer.schedule='cosine' and optimizer.decay_over='run', "
                             f"got schedule={self.schedule!r}, decay_over={self.decay_over!r}")
        if self.warmup_steps < 0:
            raise MooziError(f"optimizer.warmup_steps must be >= 0, got {self.warmup_steps}")
        if not self.weight_decay >= 0.0:
            raise MooziError(f"optimizer.weight_decay must be >= 0, got {self.weight_decay!r}")


@flax.struct.dataclass
class TrainState:
    """Everything the learner carries between updates; a pytree of arrays only."""

    params: Any  # online network parameters θ
    batch_stats: Any  # online network's running batch-norm moments
    target_params: Any  # target network parameters: θ's last periodic copy, or its moving average
    target_batch_stats: Any  # the target network's batch-norm moments, copied or averaged with them
    opt_state: Any  # optax state of the clipped Adam
    step: Array  # int32 scalar: number of updates applied


def decays_over_run(config: OptimizerConfig) -> bool:
    return config.schedule == "cosine" and config.decay_over == "run"


def run_decay(config: OptimizerConfig, progress):
    """The factor on the learning rate at `progress` (0 to 1) of the run's planned length: with
    decay_over="run", 1 until decay_start, then the cosine to final_learning_rate_fraction at the
    end; else 1."""
    if not decays_over_run(config):
        return jnp.ones((), jnp.float32)
    decaying = jnp.maximum(progress - config.decay_start, 0.0) / (1.0 - config.decay_start)
    # optax's cosine over one "step" of progress (it holds the final value past the end).
    return optax.cosine_decay_schedule(1.0, 1, alpha=config.final_learning_rate_fraction)(decaying)


def make_schedule(config: OptimizerConfig) -> optax.Schedule:
    """Learning rate as a function of the update count (with decay_over="run" the peak after the
    warm-up; `run_decay` scales it by the run's progress)."""
    if config.schedule == "cosine" and not decays_over_run(config):
        after = optax.cosine_decay_schedule(
            config.learning_rate, max(config.decay_steps, 1), alpha=config.final_learning_rate_fraction
        )
    else:
        after = optax.constant_schedule(config.learning_rate)
    if config.warmup_steps == 0:
        return after
    warmup = optax.linear_schedule(0.0, config.learning_rate, config.warmup_steps)
    return optax.join_schedules([warmup, after], [config.warmup_steps])


def make_optimizer(config: OptimizerConfig) -> optax.GradientTransformation:
    """Global-norm clipping, then Adam on the scheduled learning rate (AdamW with optimizer.weight_decay)."""
    if config.weight_decay > 0.0:
        adam = optax.adamw(make_schedule(config), b1=config.adam_b1, b2=config.adam_b2, eps=config.adam_eps,
                           weight_decay=config.weight_decay, mask=_kernels)
    else:  # plain Adam keeps the optimizer state's structure, so older checkpoints load
        adam = optax.adam(make_schedule(config), b1=config.adam_b1, b2=config.adam_b2, eps=config.adam_eps)
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), adam)


def _kernels(params):
    """True for the weight matrices and convolution kernels (2 or more axes), False for biases and scales."""
    return jax.tree.map(lambda p: p.ndim >= 2, params)


def init_train_state(network: Network, optimizer_config: OptimizerConfig, rng, example_stacked_obs) -> TrainState:
    """Fresh parameters; the target network starts as a copy of them."""
    # One compiled program: eager Flax init dispatches (and compiles) op by op.
    variables = jax.jit(network.init)(rng, example_stacked_obs)
    params, batch_stats = variables["params"], variables["batch_stats"]
    return TrainState(
        params=params,
        batch_stats=batch_stats,
        target_params=params,
        target_batch_stats=batch_stats,
        opt_state=make_optimizer(optimizer_config).init(params),
        step=jnp.zeros((), jnp.int32),
    )


def refresh_target(online, target, step, config: OptimizerConfig):
    """The target network after update `step`: the online one every T-th update, or its moving average.

    The batch-norm moments are averaged (or copied) with the parameters, so the target network's
    normalisation stays that of the parameters it holds.
    """
    if config.target_ema_decay > 0.0:
        return optax.incremental_update(online, target, 1.0 - config.target_ema_decay)
    return optax.periodic_update(online, target, step, config.target_update_period)


AGENT_NETWORKS = ("online", "target")


def agent_variables(state: TrainState, network: str = "online") -> dict:
    """The variables {"params", "batch_stats"} of the online or the target network of a TrainState."""
    if network == "target":
        return {"params": state.target_params, "batch_stats": state.target_batch_stats}
    if network == "online":
        return {"params": state.params, "batch_stats": state.batch_stats}
    raise MooziError(f"network must be one of {AGENT_NETWORKS}, got {network!r}")


# Memoized (every argument is a frozen dataclass or a function): a process that builds the same update
# twice traces and compiles it once (see moozi.builders._act).
@functools.lru_cache(maxsize=16)
def make_train_step(
    network: Network, loss_config: LossConfig, optimizer_config: OptimizerConfig, loss: Callable = loss_fn,
) -> Callable[[TrainState, TrainingTarget, Array], tuple[TrainState, dict, Array]]:
    """The jitted update: (state, batch, rng, progress) -> (state, metrics, new_priorities [B]).

    `loss` is differentiated with respect to its first argument: loss.py's `loss_fn`, or one with its
    signature and `LossAux` (Stochastic MuZero's `stochastic_loss_fn`, whose batch is a
    `StochasticTrainingTarget` and whose `loss_config` a `StochasticLossConfig`).

    rng is accepted for a stable signature (nothing in the update is random yet). progress (0 to 1,
    default 0) is the share of the run's planned length done, read only by decay_over="run".
    """
    optimizer = make_optimizer(optimizer_config)
    schedule = make_schedule(optimizer_config)
    grad_fn = jax.value_and_grad(loss, has_aux=True)

    def train_step(state: TrainState, batch: TrainingTarget, rng, progress=0.0):
        del rng
        target_variables = agent_variables(state, "target")
        (_, aux), grads = grad_fn(
            state.params, state.batch_stats, target_variables, batch, network=network, config=loss_config,
            update=state.step,
        )
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        decay = run_decay(optimizer_config, progress)
        if decays_over_run(optimizer_config):  # else the program stays as it was: no scaling by 1
            # Adam's step is proportional to its learning rate: scaling the step scales the rate.
            updates = jax.tree_util.tree_map(lambda u: u * decay.astype(u.dtype), updates)
        params = optax.apply_updates(state.params, updates)
        step = state.step + 1
        target_params, target_batch_stats = refresh_target(
            (params, aux.batch_stats), (state.target_params, state.target_batch_stats), step, optimizer_config)
        metrics = dict(aux.metrics)
        metrics.update(grad_norm=optax.global_norm(grads), learning_rate=schedule(state.step) * decay)
        new_state = TrainState(
            params=params,
            batch_stats=aux.batch_stats,
            target_params=target_params,
            target_batch_stats=target_batch_stats,
            opt_state=opt_state,
            step=step,
        )
        return new_state, metrics, aux.priorities

    return jax.jit(train_step)
