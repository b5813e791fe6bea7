"""IMPALA (Espeholt et al. 2018): an actor-critic learning from its actors' possibly older policy with
V-trace off-policy corrections (rlax). See docs/impala.md."""

from moozi.agents.impala.config import IMPALAConfig

__all__ = ["IMPALAConfig"]
