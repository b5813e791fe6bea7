"""How far the network that acts is from the network that trains, checkpoint by checkpoint.

    python bench/batch_norm_gap.py RUN_DIR [--checkpoints ckpt-0000019950 ...] [--batches 8]

With batch norm (`network.normalization=batch`) the learner normalises each call with the moments of
its batch, while acting (the search, the in-training tests, `load_agent`) normalises with the running
moments. This reads training batches from each checkpoint's replay snapshot (so only `ckpt-*`
directories, which hold one) and unrolls each batch twice with the parameters the agent plays
(`train.agent_network`): as the loss does (training mode, the batch's moments at every depth) and as
the search would (acting mode, the running moments). One JSON
line per checkpoint gives, at each unroll depth k (0 is the root): the share of states whose most
likely move is the same in both modes, the mean KL divergence of the acting-mode policy from the
training-mode one, the mean absolute difference of the two values, and how often each mode's most
likely move is the search target p*'s.

The moments' decay is fast (`network.batch_norm_momentum`), so a gap here is mostly not staleness:
the running moments of f and g average over every depth the learner unrolls, while training
normalises each depth with its own batch.
"""

from __future__ import annotations

import argparse
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

import moozi
from moozi.builders import build_network, env_spec
from moozi.errors import MooziError
from moozi.training.roles.replay_buffer import ReplayRole


def _unroll(network, variables, batch, train: bool):
    """[(policy_logits [B, A], value [B])] at depths 0..K, as the loss (train) or the search would."""
    if train:
        out, _ = network.initial_inference_train(variables, batch.stacked_obs)
    else:
        out = network.initial_inference(variables, batch.stacked_obs)
    outputs = [(out.policy_logits, out.value)]
    hidden = out.hidden_state
    for k in range(batch.actions.shape[1]):
        if train:
            out, _ = network.recurrent_inference_train(variables, hidden, batch.actions[:, k])
        else:
            out = network.recurrent_inference(variables, hidden, batch.actions[:, k])
        outputs.append((out.policy_logits, out.value))
        hidden = out.hidden_state
    return outputs


def measure(network, variables, batch) -> list[dict]:
    """Per depth k, over the states where p*_{t+k} exists: the two modes' agreement (see the module doc)."""
    trained = _unroll(network, variables, batch, train=True)
    acted = _unroll(network, variables, batch, train=False)
    rows = []
    for k, ((train_logits, train_value), (act_logits, act_value)) in enumerate(zip(trained, acted)):
        mask = np.asarray(batch.policy_mask[:, k]) > 0
        log_p_train = jax.nn.log_softmax(train_logits)
        log_p_act = jax.nn.log_softmax(act_logits)
        kl = jnp.sum(jnp.exp(log_p_act) * (log_p_act - log_p_train), axis=-1)
        target_move = np.argmax(np.asarray(batch.action_probs[:, k]), axis=-1)
        train_move, act_move = np.argmax(np.asarray(train_logits), -1), np.argmax(np.asarray(act_logits), -1)
        rows.append({
            "states": int(mask.sum()),
            "same_move": float(np.mean((train_move == act_move)[mask])),
            "kl_act_from_train": float(np.mean(np.asarray(kl)[mask])),
            "value_abs_diff": float(np.mean(np.abs(np.asarray(train_value) - np.asarray(act_value))[mask])),
            "train_move_is_target": float(np.mean((train_move == target_move)[mask])),
            "act_move_is_target": float(np.mean((act_move == target_move)[mask])),
        })
    return rows


def _mean_rows(per_batch: list[list[dict]]) -> list[dict]:
    """Each depth's figures averaged over the batches, weighted by their states."""
    out = []
    for depth_rows in zip(*per_batch):
        states = sum(r["states"] for r in depth_rows)
        out.append({"states": states, **{key: round(sum(r[key] * r["states"] for r in depth_rows) / max(states, 1), 4)
                                          for key in depth_rows[0] if key != "states"}})
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=pathlib.Path)
    parser.add_argument("--checkpoints", nargs="*", help="ckpt-* directory names under RUN/checkpoints (default: all)")
    parser.add_argument("--batches", type=int, default=8, help="training batches read per checkpoint")
    args = parser.parse_args(argv)
    folder = args.run_dir / "checkpoints"
    names = args.checkpoints or sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name.startswith("ckpt-"))
    if not names:
        raise MooziError(f"{folder} holds no ckpt-* checkpoints (best-* ones keep no replay to read batches from)")
    for name in names:
        agent = moozi.load_agent(args.run_dir, checkpoint=folder / name)
        config = agent.config
        if config.network.normalization != "batch":
            raise MooziError(f"{args.run_dir} trains with network.normalization={config.network.normalization}: "
                             "acting and training normalise alike, there is no gap to read")
        network = build_network(config, env_spec(config))
        role = ReplayRole.from_checkpoint(config, folder / name)
        per_batch = [measure(network, agent.variables, batch)
                     for batch, _ in role.sample_batches(args.batches, config.train.batch_size)]
        counters = json.loads((folder / name / "meta.json").read_text()).get("counters", {})
        print(json.dumps({"checkpoint": name, "updates": counters.get("updates"), "depths": _mean_rows(per_batch)}),
              flush=True)


if __name__ == "__main__":
    main()
