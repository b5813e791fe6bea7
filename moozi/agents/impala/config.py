"""IMPALA's settings: one frozen dataclass."""

from __future__ import annotations

import dataclasses

from moozi.agents.actor_critic.networks import check_torso
from moozi.errors import MooziError


@dataclasses.dataclass(frozen=True)
class IMPALAConfig:
    """Defaults: the IMPALA paper's Atari settings (Espeholt et al. 2018, Table D.1 / G.1): RMSProp with
    decay 0.99 and epsilon 0.01, gradient norm clipped at 40, baseline cost 0.5, entropy cost 0.01,
    discount 0.99, V-trace with rho-bar = c-bar = 1 (lambda 1), step size 6e-4. Two departures, as
    PPO's defaults make them (moozi/agents/ppo/config.py): the step size stays constant (the paper's
    falls linearly to 0, which ties a run to one length; `anneal_learning_rate=True` restores it), and
    the critic has a torso of its own (the `atari` preset shares one, as the paper does)."""

    num_envs: int = 32  # B: the actors' envs, one batch per rollout
    rollout_steps: int = 20  # T: the unroll length (the paper's 20)
    policy_lag: int = 1  # the actors play parameters one update old, as IMPALA's actors do (0: the latest)
    # True: the host loop's actor-learner queue (docs/impala.md): the learner updates on each worker's
    # rollout as it finishes, and the lag is whatever the queue gives (policy_lag is then not used).
    asynchronous: bool = False
    learning_rate: float = 6e-4
    anneal_learning_rate: bool = False
    anneal_env_steps: int = 10_000_000
    rmsprop_decay: float = 0.99
    rmsprop_epsilon: float = 0.01
    max_grad_norm: float = 40.0
    discount: float = 0.99
    vtrace_lambda: float = 1.0
    clip_rho_threshold: float = 1.0  # rho-bar: truncates the importance weight of the value targets
    clip_pg_rho_threshold: float = 1.0  # the truncation of the policy gradient's importance weight
    value_coef: float = 0.5  # the baseline cost
    entropy_coef: float = 0.01
    torso: str = "auto"  # as PPO's (moozi/agents/actor_critic/networks.py)
    mlp_hidden_sizes: tuple[int, ...] = (256, 256)
    shared_torso: bool = False  # True: one torso for policy and critic (moozi/agents/actor_critic/networks.py)

    def __post_init__(self):
        check_torso(self.torso, "impala.torso")
        for key in ("discount", "vtrace_lambda"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise MooziError(f"bad value {getattr(self, key)!r} for impala.{key}: expected 0 <= x <= 1")
        for key in ("learning_rate", "clip_rho_threshold", "clip_pg_rho_threshold", "max_grad_norm"):
            if getattr(self, key) <= 0:
                raise MooziError(f"bad value {getattr(self, key)!r} for impala.{key}: expected a positive number")
        for key in ("num_envs", "rollout_steps", "anneal_env_steps"):
            if getattr(self, key) < 1:
                raise MooziError(f"bad value {getattr(self, key)!r} for impala.{key}: expected a positive integer")
        if self.policy_lag not in (0, 1):
            raise MooziError(f"bad value {self.policy_lag!r} for impala.policy_lag: expected 0 or 1")
