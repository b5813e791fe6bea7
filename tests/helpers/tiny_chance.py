"""A one-move chance game in JAX, with its exact split into afterstate and chance outcome.

Two moves, then the game is over:
- action 1, "safe": reward `safe` for sure;
- action 2, "gamble": reward `prize` with probability `p_win`, else 0.
The dummy (0) and any other index are illegal: reward -1, and the game ends (pgx's rule).

`TinyChanceEnv` is a `JaxEnv` whose `step` draws the gamble with its key (what AlphaZero mode's
sampled search steps), and its `chance_rules` give the same step split in two (what the search with
chance nodes steps): chance code 1 is the win, code 0 the loss; every other move has the one certain
outcome 0.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from moozi.envs.afterstates import Afterstate
from moozi.envs.base import SINGLE_AGENT, EnvSpec, StepOutput

SAFE, GAMBLE = 1, 2


class TinyState(NamedTuple):
    done: jax.Array  # bool


class TinyMove(NamedTuple):
    action: jax.Array  # int32: the move made


class TinyChanceRules:
    num_chance_outcomes = 2

    def __init__(self, env: "TinyChanceEnv"):
        self._env = env

    def afterstate(self, state: TinyState, action) -> Afterstate:
        action = jnp.asarray(action, jnp.int32)
        illegal = (action != SAFE) & (action != GAMBLE)
        # Only the safe move's and the penalty's reward are known before chance.
        reward = jnp.where(illegal, -1.0, jnp.where(action == SAFE, self._env.safe, 0.0))
        return Afterstate(TinyMove(action), jnp.where(state.done, 0.0, reward).astype(jnp.float32), state.done,
                          illegal & ~state.done, jnp.int32(0), ~state.done)

    def chance_logits(self, after: Afterstate):
        gamble = (after.state.action == GAMBLE) & ~after.ended
        p = jnp.asarray(self._env.p_win, jnp.float32)
        return jnp.where(gamble, jnp.log(jnp.stack([1.0 - p, p])), jnp.asarray([0.0, -jnp.inf], jnp.float32))

    def outcome(self, after: Afterstate, code):
        code = jnp.clip(jnp.asarray(code, jnp.int32), 0, 1)
        won = (after.state.action == GAMBLE) & (code == 1)
        reward = jnp.where(after.ended, 0.0, jnp.where(won, self._env.prize, after.reward))
        state = TinyState(jnp.bool_(True))
        return state, self._env.output(state, reward, False)


class TinyChanceEnv:
    """The game as a `JaxEnv` (unbatched pure functions)."""

    def __init__(self, safe: float = 1.0, prize: float = 3.0, p_win: float = 0.3):
        self.safe, self.prize, self.p_win = float(safe), float(prize), float(p_win)
        self.spec = EnvSpec(name="tiny_chance", obs_shape=(1, 1, 2), num_actions=3, num_players=1, binary_obs=True)
        self.chance_rules = TinyChanceRules(self)

    def output(self, state: TinyState, reward, is_first) -> StepOutput:
        done = state.done
        return StepOutput(
            obs=jnp.stack([~done, done]).astype(jnp.float32).reshape(1, 1, 2),
            is_first=jnp.asarray(is_first, bool),
            is_last=done,
            reward=jnp.asarray(reward, jnp.float32),
            legal_actions=jnp.stack([done, ~done, ~done]),
            to_play=jnp.int32(SINGLE_AGENT),
        )

    def init(self, key):
        del key
        state = TinyState(jnp.bool_(False))
        return state, self.output(state, 0.0, True)

    def step(self, state: TinyState, action, is_last, key):
        action = jnp.asarray(action, jnp.int32)
        won = jax.random.uniform(key) < self.p_win
        reward = jnp.where(action == SAFE, self.safe,
                           jnp.where(action == GAMBLE, jnp.where(won, self.prize, 0.0), -1.0))
        reward = jnp.where(state.done, 0.0, reward)
        stepped = (TinyState(jnp.bool_(True)), self.output(TinyState(jnp.bool_(True)), reward, False))
        reset = self.init(key)
        return jax.tree.map(lambda a, b: jnp.where(is_last, a, b), reset, stepped)

    def close(self) -> None:
        pass
