"""PPO's settings: one frozen dataclass, the `ppo.*` section of moozi's config."""

from __future__ import annotations

import dataclasses

from moozi.agents.actor_critic.networks import check_torso
from moozi.errors import MooziError


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Defaults: cleanrl's ppo_atari (Huang et al. 2022, "The 37 implementation details of PPO"),
    except the minibatch count, which follows the rollout size (see `num_minibatches`)."""

    num_envs: int = 64  # B: envs stepped together (cleanrl: 8; more envs fill a CPU's vector units better)
    rollout_steps: int = 128  # T: steps each env takes per rollout (cleanrl's num_steps)
    # 0: each rollout is played by the latest parameters. 1: by the parameters one update older, Cleanba's
    # synchronous schedule (the learner trains on version i-1's data while the actors play version i).
    policy_lag: int = 0
    learning_rate: float = 2.5e-4  # Adam's peak step size
    anneal_learning_rate: bool = True  # linearly to 0 over `anneal_env_steps`
    anneal_env_steps: int = 10_000_000  # the horizon of the annealing (cleanrl: the run's total steps)
    adam_epsilon: float = 1e-5  # cleanrl's, not Adam's 1e-8
    discount: float = 0.99  # gamma
    gae_lambda: float = 0.95
    clip_epsilon: float = 0.1  # the surrogate's ratio clip
    clip_value: bool = True  # clip the value update to +-clip_epsilon around the rollout's value
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    max_grad_norm: float = 0.5
    num_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 4  # each epoch's shuffled split of the B x T rollout
    normalize_advantages: bool = True  # per minibatch, as cleanrl does
    torso: str = "auto"  # "mlp", "nature_cnn", or "auto" (moozi/agents/actor_critic/networks.py)
    mlp_hidden_sizes: tuple[int, ...] = (256, 256)

    def __post_init__(self):
        check_torso(self.torso, "ppo.torso")
        for key in ("num_envs", "rollout_steps", "num_epochs", "num_minibatches", "anneal_env_steps"):
            if getattr(self, key) < 1:
                raise MooziError(f"bad value {getattr(self, key)!r} for ppo.{key}: expected a positive integer")
        for key in ("discount", "gae_lambda"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise MooziError(f"bad value {getattr(self, key)!r} for ppo.{key}: expected 0 <= x <= 1")
        if self.policy_lag not in (0, 1):
            raise MooziError(f"bad value {self.policy_lag!r} for ppo.policy_lag: expected 0 or 1")
        if self.clip_epsilon <= 0 or self.learning_rate <= 0:
            raise MooziError("ppo.clip_epsilon and ppo.learning_rate must be positive")
