"""A tiny go9 run for the GTP tests: the tiny tic-tac-toe settings on the go9 preset, built once per session."""

from tests.helpers.tiny import TINY, run_driver

from moozi.config import build_config

# MLP network, 2 envs: each env finishes a game (at most 162 moves) within the 7 iterations, so the
# replay buffer fills and the learner takes a few updates before the final checkpoint.
TINY_GO9 = {
    **TINY,
    "network.kind": "mlp",
    "env.num_envs": "2",
    "train.rollout_steps": "27",
    "train.max_env_steps": str(2 * 27 * 7),
    "train.test_every_updates": "1000",
}

# AlphaZero mode's go9 preset has a convolutional policy head and ownership heads: a tiny residual
# network instead of the MLP.
TINY_GO9_ALPHAZERO = {
    **{key: value for key, value in TINY_GO9.items() if key != "network.kind"},
    "network.channels": "4",
    "network.representation_blocks": "1",
    "network.dynamics_blocks": "1",
}

# The tests that play a tiny go9 run share one xdist worker (pyproject.toml: --dist loadgroup), so each
# run is trained, and its searches compiled, once in the suite rather than once per worker.
TINY_GO9_GROUP = "tiny_go9"

_BUILT = {}


def tiny_go9_run(tmp_path_factory, agent: str = "muzero"):
    """The run directory (trained on first use in this test session); agent=alphazero trains on pgx's go."""
    if agent not in _BUILT:
        run_dir = tmp_path_factory.mktemp(f"tiny_go9_{agent}") / "run"
        tiny = TINY_GO9_ALPHAZERO if agent == "alphazero" else TINY_GO9
        summary = run_driver(build_config("go9", overrides={**tiny, "agent": agent}), run_dir)
        assert summary["updates"] > 0, summary
        _BUILT[agent] = run_dir
    return _BUILT[agent]
