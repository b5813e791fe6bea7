"""Adding your own game to moozi: a tiny Nim, registered and played.

Run it:  python docs/custom_game.py

A game is any class that satisfies the `moozi.envs.Env` protocol (see
`moozi/envs/base.py` and docs/envs.md): a `spec`, `reset(seed)`, `step(action,
is_last)` and `close()`, producing `StepOutput`s. `register_game(name, factory)`
then makes `make_env(name, **options)` build it, in this Python process, like
any preset. Check a new game with the conformance suite the built-in bridges
pass, installed with moozi: `from moozi.envs.testing import check_host_env; check_host_env(Nim)`.

The game: a heap of stones (its size drawn from the env's seeded RNG); the two
players take turns removing 1 to 3 stones, and whoever takes the last stone wins.
"""

from __future__ import annotations

import numpy as np

from moozi.envs import DUMMY_ACTION, EnvSpec, StepOutput, make_env, register_game
from moozi.errors import IllegalActionError

MAX_TAKE = 3  # a move removes 1..MAX_TAKE stones; augmented action a >= 1 removes a stones


class Nim:
    """Two-player Nim as a moozi host env."""

    def __init__(self, *, seed: int | None = None, min_heap: int = 5, max_heap: int = 12):
        self._min_heap, self._max_heap = min_heap, max_heap
        self.spec = EnvSpec(
            name="nim",
            # Observation: the heap size, one-hot, as a vector (1, 1, C). Nim looks the
            # same to both players, so no "who is to move" plane is needed.
            obs_shape=(1, 1, max_heap + 1),
            num_actions=MAX_TAKE + 1,  # the dummy action 0, then "take 1".."take 3"
            num_players=2,
            binary_obs=True,
            max_episode_steps=max_heap,
            action_names=tuple(f"take {n}" for n in range(1, MAX_TAKE + 1)),
        )
        self._rng = np.random.default_rng(seed)
        self._heap, self._to_play, self._done = 0, 0, True

    def reset(self, seed: int | None = None) -> StepOutput:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._heap = int(self._rng.integers(self._min_heap, self._max_heap + 1))
        self._to_play, self._done = 0, False
        return self._output(is_first=True, reward=0.0)

    def step(self, action: int, is_last: bool) -> StepOutput:
        if is_last:  # moozi's envs restart themselves: the main loop never special-cases episode ends
            return self.reset()
        legal = np.flatnonzero(self._legal())
        if int(action) not in legal:
            raise IllegalActionError(f"action {action} is illegal in nim; legal: {legal.tolist()}")
        self._heap -= int(action)
        self._done = self._heap == 0
        # The reward belongs to the player who just acted: +1 for taking the last stone.
        reward = 1.0 if self._done else 0.0
        self._to_play = 1 - self._to_play  # at the end: the loser, who would move next
        return self._output(is_first=False, reward=reward)

    def close(self) -> None:
        pass

    def _legal(self) -> np.ndarray:
        mask = np.zeros(self.spec.num_actions, bool)
        if self._done:
            mask[DUMMY_ACTION] = True  # after the end only the dummy action is legal
        else:
            mask[1 : min(MAX_TAKE, self._heap) + 1] = True
        return mask

    def _output(self, *, is_first: bool, reward: float) -> StepOutput:
        obs = np.zeros(self.spec.obs_shape, np.float32)
        obs[0, 0, self._heap] = 1.0
        return StepOutput(
            obs=obs,
            is_first=np.bool_(is_first),
            is_last=np.bool_(self._done),
            reward=np.float32(reward),
            legal_actions=self._legal(),
            to_play=np.int32(self._to_play),
        )


def main() -> list[str]:
    register_game("nim", Nim)
    env = make_env("nim", seed=0, max_heap=8)
    rng = np.random.default_rng(0)
    out = env.reset()
    lines = [f"heap {int(out.obs.argmax())}, player {int(out.to_play)} to move"]
    while not out.is_last:
        player = int(out.to_play)
        action = int(rng.choice(np.flatnonzero(out.legal_actions)))
        out = env.step(action, out.is_last)
        lines.append(f"player {player} takes {action}, heap {int(out.obs.argmax())}, reward {float(out.reward):+.0f}")
    lines.append(f"player {1 - int(out.to_play)} wins")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
