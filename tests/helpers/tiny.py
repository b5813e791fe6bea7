"""A tiny tic-tac-toe setup shared by the role, driver and Ray tests: seconds per run."""

from moozi.config import build_config
from moozi.runs.metrics_log import read_metrics
from moozi.training.driver import Driver

TINY = {
    "network.mlp_hidden_sizes": "16",
    "network.mlp_hidden_state_size": "8",
    "network.head_hidden": "16",
    "planner.num_simulations": "4",
    "planner.play_simulations": "none",  # tiny runs play as they train (a preset's play-time count is not tiny)
    "env.num_envs": "4",
    "train.batch_size": "8",
    "train.rollout_steps": "6",
    "train.updates_per_iteration": "2",
    "train.log_every_updates": "4",
    "train.test_every_updates": "8",
    "train.test_episodes": "4",
    "replay.min_fill": "40",
    "replay.capacity": "2000",
    "targets.num_unroll_steps": "2",
}
STEPS_PER_ITERATION = 4 * 6  # env.num_envs x train.rollout_steps, per training worker

# Metrics that depend only on the seed and config (not on wall-clock time).
DETERMINISTIC = (
    "policy_loss", "value_loss", "reward_loss", "consistency_loss", "l2_loss", "total_loss",
    "episode_length", "env_steps", "episodes", "policy_version", "replay_size", "replay_mean_priority",
    "test_win_rate", "test_draw_rate", "test_loss_rate",
)


def tiny_config(**overrides):
    return build_config("tic_tac_toe", overrides={**TINY, **{k: str(v) for k, v in overrides.items()}})


def deterministic_rows(run_dir):
    return [{k: row[k] for k in ("step", "role", *DETERMINISTIC) if k in row} for row in read_metrics(run_dir)]


def run_driver(config, run_dir, resume=False):
    driver = Driver(config, run_dir, resume=resume, progress=False)
    try:
        return driver.run()
    finally:
        driver.close()
