"""PPO's settings: one frozen dataclass, the `ppo.*` section of moozi's config."""

from __future__ import annotations

import dataclasses

from moozi.agents.actor_critic.networks import check_torso
from moozi.errors import MooziError


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Defaults: gymnax-blines' PPO settings for the MinAtar games (Lange 2022, `agents/<game>-MinAtar/ppo.yaml`
    in the gymnax-blines repository): B = 64 envs, T = 128 steps, 4 epochs of 8 minibatches, clip 0.2,
    Adam at a constant 5e-4, and a critic with its own torso. The discount is cleanrl's 0.99
    (gymnax-blines use 0.999; 0.99 learned Breakout a little faster here, docs/ppo.md).

    The rest is cleanrl's (Huang et al. 2022, "The 37 implementation details of PPO"). For Atari frames,
    where the Nature CNN is the torso, the `atari` preset returns to cleanrl's `ppo_atari` settings
    (moozi/config/presets.py). With the cleanrl Atari settings on MinAtar Breakout (shared torso,
    clip 0.1, step 2.5e-4, 4 minibatches) the return stayed near 7 for 8M steps; with these it
    passed 19 by then (docs/ppo.md, "Results on this machine")."""

    num_envs: int = 64  # B: envs stepped together (more envs fill a CPU's vector units better)
    rollout_steps: int = 128  # T: steps each env takes per rollout (cleanrl's num_steps)
    # 0: each rollout is played by the latest parameters. 1: by the parameters one update older, Cleanba's
    # synchronous schedule (the learner trains on version i-1's data while the actors play version i).
    policy_lag: int = 0
    learning_rate: float = 5e-4  # Adam's (peak) step size
    # Off by default: annealing to 0 ties the run to one length (`anneal_env_steps`), and a run
    # resumed or extended past it would stop learning.
    anneal_learning_rate: bool = False
    anneal_env_steps: int = 10_000_000  # the horizon of the annealing when on (cleanrl: the run's total steps)
    adam_epsilon: float = 1e-5  # cleanrl's, not Adam's 1e-8
    discount: float = 0.99  # gamma
    gae_lambda: float = 0.95
    clip_epsilon: float = 0.2  # the surrogate's ratio clip
    clip_value: bool = True  # clip the value update to +-clip_epsilon around the rollout's value
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    max_grad_norm: float = 0.5
    num_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 8  # each epoch's shuffled split of the B x T rollout
    normalize_advantages: bool = True  # per minibatch, as cleanrl does
    torso: str = "auto"  # "mlp", "nature_cnn", or "auto" (moozi/agents/actor_critic/networks.py)
    mlp_hidden_sizes: tuple[int, ...] = (256, 256)
    # False: the critic has its own torso (moozi/agents/actor_critic/networks.py). cleanrl's Atari
    # agent shares one; its agents for vector observations, gymnax-blines' and PureJaxRL's do not.
    shared_torso: bool = False

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
