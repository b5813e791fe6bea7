"""The testing rollout worker (thesis 5.2.14): the greedy agent measured during training."""

from __future__ import annotations

import threading

import jax
import numpy as np

from moozi.builders import env_spec, make_acting, make_vector_env, searches_env_state
from moozi.config import Config
from moozi.core.planner import greedy_planner_config
from moozi.core.territory import final_ownership_and_score
from moozi.evaluation.intervals import wilson_interval
from moozi.evaluation.vector_matches import play_batch, random_opponent
from moozi.evaluation.position_eval import CONNECT_FOUR_GAMES, PositionsEvaluator, test_positions


def area_metrics(played, territory) -> dict[str, float]:
    """Territory games (Go): the agent's final area margin (komi included) and its own area, on the
    Tromp-Taylor count of each finished test game's last board, from the agent's side. They keep
    moving after the win rate against a random mover saturates: a stronger agent leaves it less."""
    finished = played.finished
    if not finished.any():
        return {}
    ownership, margin = jax.vmap(lambda o: final_ownership_and_score(o, territory))(played.final_obs[finished])
    sign = np.where(played.final_to_play[finished] == played.agent_seat[finished], 1.0, -1.0)
    own_area = np.sum(np.asarray(ownership) * sign[:, None, None] > 0, axis=(1, 2))
    return {"test_area_margin": float(np.mean(np.asarray(margin) * sign)), "test_own_area": float(np.mean(own_area))}


class TestingRolloutWorker:
    """Greedy evaluation during training (thesis 5.2.14).

    One-player games: mean return over `episodes` episodes. Two-player games:
    win/draw/loss rate against a uniform-random player, half the games in
    each seat. Episodes run as one batch, each env until its first episode
    ends, so a test costs one batched search per step. Connect Four also
    measures the greedy move on a fixed subset of the solver-labelled
    positions (`test_solver_*`, `test_value_sign_accuracy`; moozi/evaluation/).
    Go also reports the area left to it (`test_area_margin`, `test_own_area`; `area_metrics`).
    """

    __test__ = False  # a role, not a pytest test class (its name starts with Test)

    def __init__(self, config: Config):
        self.config = config
        self.spec = env_spec(config)
        self._act = make_acting(config, self.spec, greedy_planner_config(config.planner))
        self._needs_env_state = searches_env_state(config)
        self._positions = None
        if self.spec.name in CONNECT_FOUR_GAMES:
            # Read now, so a missing data file stops the run before training, not at its first test.
            self._positions = test_positions()
        self._position_evaluators = {}  # batch size -> PositionsEvaluator: inputs built once per size
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Ends a test in progress at its next step: the run is closing and will not read it. Called
        from another thread (a test plays beside the training loop, which may stop meanwhile)."""
        self._cancelled.set()

    def run(self, params, episodes: int, seed: int) -> dict[str, float]:
        spec = self.spec
        env = make_vector_env(self.config, episodes, seed)
        try:
            played = play_batch(
                self._act, params, env, history_length=self.config.targets.history_length,
                obs_shape=spec.obs_shape, is_two_player=spec.is_two_player, seed=seed,
                max_steps=self.config.train.test_max_steps,
                opponent=random_opponent(seed) if spec.is_two_player else None,
                needs_env_state=self._needs_env_state, cancelled=self._cancelled,
            )
        finally:
            env.close()
        outcome, total, done = played.outcome, played.returns, played.finished
        if spec.is_two_player:
            win_low, win_high = wilson_interval(int(np.sum(outcome > 0)), episodes)
            metrics = {
                "test_win_rate": float(np.mean(outcome > 0)),
                "test_win_rate_ci_low": win_low,  # 95% Wilson interval over the test's games
                "test_win_rate_ci_high": win_high,
                "test_draw_rate": float(np.mean(outcome == 0)),
                "test_loss_rate": float(np.mean(outcome < 0)),
            }
            if spec.territory is not None:
                metrics.update(area_metrics(played, spec.territory))
            if self._positions is not None and not self._cancelled.is_set():
                metrics.update(self._position_metrics(params, episodes, jax.random.key(seed)))
            return metrics
        return {"test_return": float(np.mean(total)), "test_return_std": float(np.std(total)),
                "test_cut_episodes": float(np.sum(~done))}

    def _position_metrics(self, params, batch_size: int, key) -> dict[str, float]:
        # Searched in batches of the test's own size: the acting program compiled for the test
        # games serves, and on a CPU k searches of B positions cost about one search of kB.
        if batch_size not in self._position_evaluators:
            self._position_evaluators[batch_size] = PositionsEvaluator(
                self.config, self.spec, self._act, self._positions, batch_size=batch_size
            )
        return self._position_evaluators[batch_size].evaluate(params, key).test_metrics()
