"""PPO (Schulman et al. 2017) on moozi's env contract: clipped surrogate objective, GAE, optional
value clipping, epochs of shuffled minibatches, advantage normalisation, an entropy bonus and a
linearly annealed learning rate, with the defaults of cleanrl's `ppo_atari` (docs/ppo.md)."""

from moozi.agents.ppo.config import PPOConfig

__all__ = ["PPOConfig"]
