"""Do the search's values promise more than the play delivers? Checkpoint by checkpoint.

    python bench/value_bias.py RUN_DIR [--checkpoints ckpt-0000019950 ...]

Each `ckpt-*` checkpoint keeps its replay: whole episodes of the agent's own play, each step with the
root value v*_t its search gave when it chose the move. Here each v*_t is set beside the discounted
return the same episode then paid from t on, G_t = r_{t+1} + γ r_{t+2} + ... to the episode's end
(γ the run's `targets.discount`). v*_t estimates that return for the policy that played it, so the
mean of v*_t - G_t over the stored steps is the values' bias on the agent's own play: below zero
they promise less than it gets, above zero more. One JSON line per checkpoint: episodes and steps
read, the two means, the bias, the mean absolute gap and their correlation.

Used on MinAtar (docs/experiments/2026-11-27-one-minatar-preset.md): a greedy agent whose values
promise more than its play pays steers into the promises. One-player games only: in a two-player
game v* and the rewards take the mover's side, and the return would need each step's sign.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from bench.episode_end import discounted_returns  # noqa: E402
from moozi.builders import env_spec  # noqa: E402
from moozi.config.loading import load_saved_config  # noqa: E402
from moozi.errors import MooziError  # noqa: E402
from moozi.runs.checkpoint import complete_checkpoints  # noqa: E402
from moozi.training.roles.replay_buffer import ReplayRole  # noqa: E402


def measure(role: ReplayRole, discount: float) -> dict:
    """The bias of the stored root values against the returns of the stored whole episodes."""
    values, returns = [], []
    for _, episode in role.sample_trajectories(role.buffer.num_trajectories):
        if not (episode.is_first[0] and episode.is_last[-1]):
            continue  # an episode cut by the replay's eviction has no return to its end
        values.append(np.asarray(episode.root_value, np.float64))
        # Step t stores r_t, the reward for arriving at o_t: G_t starts at r_{t+1}.
        length = len(episode.reward)
        returns.append(discounted_returns(episode.reward, np.arange(length), np.full(length, length), discount)
                       .astype(np.float64))
    if not values:
        raise MooziError("the replay holds no whole episode")
    v, g = np.concatenate(values), np.concatenate(returns)
    correlation = float(np.corrcoef(v, g)[0, 1]) if v.std() > 0 and g.std() > 0 else float("nan")
    return {"episodes": len(values), "steps": int(len(v)), "root_value_mean": round(float(v.mean()), 4),
            "return_mean": round(float(g.mean()), 4), "bias": round(float(np.mean(v - g)), 4),
            "abs_gap": round(float(np.mean(np.abs(v - g))), 4), "correlation": round(correlation, 4)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=pathlib.Path)
    parser.add_argument("--checkpoints", nargs="*", help="ckpt-* directory names under RUN/checkpoints (default: all)")
    args = parser.parse_args(argv)
    config = load_saved_config(args.run_dir / "config.json")
    if env_spec(config).num_players != 1:
        raise MooziError(f"{config.game} has two players: value_bias reads one-player games only")
    paths = [p for p in complete_checkpoints(args.run_dir) if not args.checkpoints or p.name in args.checkpoints]
    if not paths:
        raise MooziError(f"{args.run_dir} holds no such ckpt-* checkpoint (best-* ones keep no replay)")
    for path in paths:
        role = ReplayRole.from_checkpoint(config, path)
        counters = json.loads((path / "meta.json").read_text()).get("counters", {})
        print(json.dumps({"checkpoint": path.name, "updates": counters.get("updates"),
                          **measure(role, config.targets.discount)}), flush=True)


if __name__ == "__main__":
    main()
