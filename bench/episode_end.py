"""Does a one-player run's model see the end of its episodes coming? Read off the replay in a checkpoint.

    python bench/episode_end.py RUN [--checkpoint latest|best|DIR] [--samples 512]
                                [--player-channel 0 --enemy-channel 1]

Where an episode ends by losing (MinAtar's Asterix, Seaquest, Breakout), the states just before
its end are worth nothing, and a model that plans well knows it. On the replay stored in the
checkpoint (every stored step, its search value v*, its action and the episode's length T):

- by steps to the end, d = T - 1 - t: the discounted return the agent then got (G), the stored
  search value v*, and the network's value of the state (acting mode);
- at the state before the last (d = 1): the model's one-step Q, r + gamma * v after the dynamics
  function, of the move that was taken (the one after which the episode ended) and of the other
  legal moves; and the value after that move unrolled in training mode (the value target there
  is 0: the next state is terminal);
- with --player-channel and --enemy-channel (MinAtar planes: Asterix's player is channel 0, its
  enemies channel 1): the share of those last moves that stepped onto an enemy's cell, a
  mistake the observation shows, and Q of such moves against the others in states where one
  is possible.

Prints a table, then ONE JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from moozi.play import load_agent  # noqa: E402
from moozi.builders import build_network  # noqa: E402
from moozi.core.targets import StepStorage, assemble_targets, gather_window  # noqa: E402
from moozi.envs.base import DUMMY_ACTION  # noqa: E402

BINS = ((0, 0), (1, 1), (2, 2), (3, 3), (4, 5), (6, 10), (11, 20), (21, 50), (51, None))
# MinAtar moves as (row, column) steps, by name: the grid does not wrap, so a step off it stays put.
MOVES = {"noop": (0, 0), "left": (0, -1), "up": (-1, 0), "right": (0, 1), "down": (1, 0), "fire": (0, 0)}


def discounted_returns(reward, step_index, episode_length, discount):
    """G_t = sum_i gamma^(i-1) r_{t+i} within each episode; storage keeps an episode's steps in
    consecutive slots (oldest slots first), so one backward pass suffices."""
    returns = np.zeros(len(reward), np.float32)
    for i in range(len(reward) - 2, -1, -1):
        if episode_length[i] > 0 and step_index[i] + 1 < episode_length[i]:
            returns[i] = reward[i + 1] + discount * returns[i + 1]
    return returns


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--checkpoint", default="latest", help="latest (default) | best | a checkpoint directory")
    parser.add_argument("--samples", type=int, default=512, help="states per row (at most)")
    parser.add_argument("--player-channel", type=int, default=None)
    parser.add_argument("--enemy-channel", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    agent = load_agent(args.run_dir, checkpoint=args.checkpoint)
    config, spec = agent.config, agent.spec
    network = build_network(config, spec)
    variables = agent.variables
    arrays = np.load(agent.checkpoint / "arrays.npz")
    storage = {name.split(".", 1)[1]: arrays[name] for name in arrays.files if name.startswith("replay/storage.")}
    obs, action = storage["obs"], storage["action"].astype(np.int32)
    step, length = storage["step_index"], storage["episode_length"]
    A, gamma = network.num_actions, config.planner.discount
    stored = (length > 0) & (step < length)
    to_end = length - 1 - step
    returns = discounted_returns(storage["reward"], step, length, config.targets.discount)
    rng = np.random.default_rng(args.seed)

    def pick(mask):
        slots = np.where(mask & stored)[0]
        return np.sort(rng.choice(slots, min(args.samples, len(slots)), replace=False)) if len(slots) else slots

    step_storage = StepStorage(**{field: storage[field] for field in StepStorage._fields})

    def stacked(slots):  # the learner's own history input: gathered and decoded as the replay buffer does
        window = gather_window(step_storage, slots, config.targets, xp=np)
        return assemble_targets(window, config=config.targets, num_actions=A, discount_sign=spec.discount_sign,
                                obs_levels=spec.stored_obs_levels).stacked_obs

    rows = []
    print(f"{args.run_dir}, {agent.checkpoint.name}: {int(stored.sum()):,} stored steps, "
          f"{int((stored & (step == 0)).sum()):,} episode starts")
    print(f"{'steps to end':>13} {'states':>7} {'G':>6} {'v*':>6} {'v net':>6}")
    for low, high in BINS:
        slots = pick((to_end >= low) & ((to_end <= high) if high is not None else True))
        if len(slots) == 0:
            continue
        value = float(np.mean(np.asarray(network.initial_inference(variables, stacked(slots)).value)))
        row = dict(low=low, high=high, states=int(len(slots)), G=float(returns[slots].mean()),
                   search_value=float(storage["root_value"][slots].mean()), network_value=value)
        rows.append(row)
        label = f"{low}" if high == low else (f"{low}-{high}" if high is not None else f">= {low}")
        print(f"{label:>13} {len(slots):7d} {row['G']:6.2f} {row['search_value']:6.2f} {value:6.2f}")

    # The last move: one-step Q of every legal action at d = 1.
    last = pick(to_end == 1)
    x = stacked(last)
    root = network.initial_inference(variables, x)
    q = np.stack([np.asarray(out.reward + gamma * out.value) for out in (
        network.recurrent_inference(variables, root.hidden_state, jnp.full((len(last),), a, jnp.int32))
        for a in range(A))], 1)  # [n, A]
    legal = np.ones((len(last), A), bool)
    legal[:, DUMMY_ACTION] = False
    taken = np.zeros_like(legal)
    taken[np.arange(len(last)), action[last]] = True
    q_taken, q_other = float(q[taken].mean()), float(q[legal & ~taken].mean())
    lowest = float(np.mean(q[taken] <= np.min(np.where(legal & ~taken, q, np.inf), axis=1)))
    unrolled = []
    for start in range(0, len(last), 128):  # training mode, in the learner's batch size
        part = slice(start, start + 128)
        out, _ = network.initial_inference_train(variables, x[part])
        out, _ = network.recurrent_inference_train(variables, out.hidden_state, jnp.asarray(action[last[part]]))
        unrolled.append(np.asarray(out.value))
    unrolled_value = float(np.mean(np.concatenate(unrolled)))
    print(f"last move (d = 1, {len(last)} states): Q(taken) {q_taken:.2f}, Q(other legal) {q_other:.2f}; "
          f"the taken move has the lowest Q in {lowest:.0%}; its unrolled value in training mode "
          f"{unrolled_value:.2f} (target 0)")
    result = dict(run=args.run_dir, checkpoint=agent.checkpoint.name, by_steps_to_end=rows,
                  last_move=dict(states=int(len(last)), q_taken=q_taken, q_other=q_other,
                                 taken_lowest_share=lowest, unrolled_value_training_mode=unrolled_value))

    if args.player_channel is not None and args.enemy_channel is not None:
        moves = [MOVES.get(name, (0, 0)) for name in ("dummy", *spec.action_names)]

        def onto_enemy(o, a):  # does move a from observation o step onto an enemy's cell?
            cells = np.argwhere(o[:, :, args.player_channel])
            if len(cells) == 0:
                return False
            (r, c), (dr, dc) = cells[0], moves[a]
            r, c = min(max(r + dr, 0), o.shape[0] - 1), min(max(c + dc, 0), o.shape[1] - 1)
            return bool(o[r, c, args.enemy_channel])

        fatal = np.array([[onto_enemy(obs[s], a) for a in range(A)] for s in last]) & legal
        stepped = float(np.mean(fatal[taken]))
        some = fatal.any(1) & (legal & ~fatal).any(1)
        q_onto = float(q[fatal & some[:, None]].mean()) if some.any() else float("nan")
        q_rest = float(q[legal & ~fatal & some[:, None]].mean()) if some.any() else float("nan")
        print(f"  last moves that stepped onto an enemy's cell: {stepped:.0%}; where such a move exists "
              f"({int(some.sum())} states): Q(onto an enemy) {q_onto:.2f} against {q_rest:.2f} for the others")
        result["last_move"].update(onto_enemy_share=stepped, q_onto_enemy=q_onto, q_not_onto_enemy=q_rest)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
