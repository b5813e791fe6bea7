"""What a trained one-player agent's search says against its prior, checkpoint by checkpoint.

    python bench/root_diagnosis.py RUN_DIR [--checkpoints ckpt-0000019950 ckpt-0000037916] [--steps 1500]

Plays one greedy episode (seed `--seed`) with each checkpoint (default: every one the run kept) and
prints one JSON line per checkpoint: the return, and over the steps played, the mean root prior, the
mean policy target p* and the share of states whose highest Q is each legal move, with the median and
10%/90% quantiles of the Q range at the root (highest minus lowest legal Q, in value units).

A prior that has drifted from the moves the search prefers shows as prior and p* far from the Q
shares; a Q range under `planner.min_value_range` means the search's preference barely moves p*
(docs/experiments/2026-11-27-one-minatar-preset.md, "why Freeway falls").
"""

from __future__ import annotations

import argparse
import json
import pathlib

import numpy as np

import moozi
from moozi.builders import env_options
from moozi.envs.base import DUMMY_ACTION
from moozi.envs.registry import make_host_env
from moozi.errors import MooziError


def _rounded(values) -> list[float]:
    return [round(float(x), 3) for x in values]


def diagnose(agent, seed: int, steps: int) -> dict:
    env = make_host_env(agent.config.game, **env_options(agent.config))
    history, step, last_action, total = agent.new_history(), env.reset(seed=seed), DUMMY_ACTION, 0.0
    priors, targets, qs = [], [], []
    legal = np.asarray(step.legal_actions, bool)
    for _ in range(steps):
        total += float(step.reward)
        if step.is_last:
            break
        if not np.array_equal(np.asarray(step.legal_actions, bool), legal):
            raise MooziError(f"{agent.config.game}'s legal moves change during play; this reads games whose moves are fixed")
        history, action, _ = agent.act(history, step, last_action)
        root = agent.last_search.root
        priors.append(np.asarray(root.prior)[legal])
        targets.append(np.asarray(agent.last_search.action_probs)[legal])
        qs.append(np.asarray(root.q)[legal])
        step, last_action = env.step(action, False), action
    if not qs:
        raise MooziError("the episode ended before the first move")
    q = np.asarray(qs)
    q_range = q.max(axis=1) - q.min(axis=1)
    labels = agent.spec.action_names  # of actions 1..A-1 (0 is the dummy action), when the game names them
    names = [labels[i - 1] if labels else str(i) for i in np.flatnonzero(legal)]
    return {
        "checkpoint": agent.checkpoint.name,
        "return": total,
        "steps": len(qs),
        "moves": names,
        "prior": _rounded(np.mean(priors, axis=0)),
        "target": _rounded(np.mean(targets, axis=0)),
        "highest_q_share": _rounded(np.bincount(q.argmax(axis=1), minlength=q.shape[1]) / len(q)),
        "q_range_median": round(float(np.median(q_range)), 4),
        "q_range_10_90": [round(float(x), 4) for x in np.percentile(q_range, [10, 90])],
        "min_value_range": agent.config.planner.min_value_range,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=pathlib.Path)
    parser.add_argument("--checkpoints", nargs="*", help="checkpoint directory names under RUN/checkpoints (default: all)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--steps", type=int, default=1500, help="moves played per checkpoint at most")
    args = parser.parse_args(argv)
    folder = args.run_dir / "checkpoints"
    names = args.checkpoints or sorted(p.name for p in folder.iterdir() if p.is_dir())
    if not names:
        raise MooziError(f"{folder} holds no checkpoints")
    for name in names:
        agent = moozi.load_agent(args.run_dir, checkpoint=folder / name)
        if agent.spec.num_players != 1:
            raise MooziError(f"{agent.config.game} has {agent.spec.num_players} players; this reads one-player games")
        print(json.dumps(diagnose(agent, args.seed, args.steps)), flush=True)


if __name__ == "__main__":
    main()
