"""Throughput of the learning core (issue 3): acting vs a bare mctx call, train steps, replay bytes.

    python bench/core.py [--quick] [--batch 256] [--simulations 50] [--rounds 5] [--calls 1]

- acting: moozi's jitted `act` (history push + stacking + initial inference +
  MuZero search with the absorbing dummy + statistics) on B envs;
- bare mctx: one jitted `mctx.muzero_policy` on the same network, batch and
  legal mask, root = initial inference on an already-stacked input, recurrent
  = recurrent inference, no absorbing logic, returning only what acting
  returns (action, p*, v*), so neither side pays for copying out the tree;
- train: `moozi.core.train_step`'s jitted train step at batch B, K = 5;
- replay: `ReplayBuffer.bytes_per_step()` for the same MinAtar-shaped game.
The thesis's residual network (32 channels, 6/1/2 blocks) on a (10, 10, 4)
input, A = 4 (dummy included), L = 2. Everything is compiled before timing;
acting and bare mctx take turns for several rounds and each one's best round
counts, so load from others on a shared machine favours neither (on a loaded
2-core machine single rounds vary by up to 30 %). Acting's extra work is small
by construction: a [B, N] bool flag beside the tree's embeddings, a few `where`s
on [B] and [B, A] arrays per simulation, the history push and the statistics.
Prints a table, then ONE JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mctx  # noqa: E402
import numpy as np  # noqa: E402

from moozi.core.acting import make_muzero_act  # noqa: E402
from moozi.core.network import NetworkConfig, make_network  # noqa: E402
from moozi.core.planner import PlannerConfig  # noqa: E402
from moozi.envs.base import EnvSpec, StepOutput  # noqa: E402
from moozi.core.history import init_history  # noqa: E402

OBS_SHAPE = (10, 10, 4)
NUM_ACTIONS = 4
HISTORY = 2
UNROLL = 5


def _best_rate(fn, items_per_call: int, calls: int) -> float:
    """Items per second of `calls` back-to-back calls (each waited on)."""
    start = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(fn())
    return items_per_call * calls / (time.perf_counter() - start)


def bench_acting(network, variables, batch: int, simulations: int, rounds: int, calls: int):
    spec = EnvSpec(name="minatar:bench", obs_shape=OBS_SHAPE, num_actions=NUM_ACTIONS, num_players=1, binary_obs=True)
    config = PlannerConfig(num_simulations=simulations)
    rng = np.random.default_rng(0)
    legal = np.ones((batch, NUM_ACTIONS), bool)
    legal[:, 0] = False
    step = StepOutput(
        obs=(rng.random((batch, *OBS_SHAPE)) < 0.2).astype(np.float32),
        is_first=np.zeros(batch, bool),
        is_last=np.zeros(batch, bool),
        reward=np.zeros(batch, np.float32),
        legal_actions=legal,
        to_play=np.full(batch, -1, np.int32),
    )
    step = jax.device_put(step)
    last_action = jnp.asarray(rng.integers(1, NUM_ACTIONS, batch), jnp.int32)
    history = init_history(batch, HISTORY, OBS_SHAPE)
    act = jax.jit(make_muzero_act(network, config, spec, HISTORY))

    # The bare reference searches from the stacked input acting would build.
    stacked = jnp.asarray(rng.random((batch, *network.input_shape)), jnp.float32)
    invalid = jnp.asarray(~legal)
    discount = config.discount

    def root_fn(variables, stacked_obs):
        out = network.initial_inference(variables, stacked_obs)
        return mctx.RootFnOutput(prior_logits=out.policy_logits, value=out.value, embedding=out.hidden_state)

    def recurrent_fn(variables, rng_key, action, hidden):
        out = network.recurrent_inference(variables, hidden, action)
        return (
            mctx.RecurrentFnOutput(
                reward=out.reward, discount=jnp.full_like(out.value, discount),
                prior_logits=out.policy_logits, value=out.value,
            ),
            out.hidden_state,
        )

    @jax.jit
    def bare(variables, stacked_obs, rng_key):
        policy = mctx.muzero_policy(
            variables, rng_key, root_fn(variables, stacked_obs), recurrent_fn, simulations, invalid_actions=invalid,
            dirichlet_fraction=config.dirichlet_fraction, dirichlet_alpha=config.dirichlet_alpha,
            pb_c_init=config.pb_c_init, pb_c_base=config.pb_c_base, temperature=config.temperature,
        )
        return policy.action, policy.action_weights, policy.search_tree.node_values[:, 0]

    keys = iter(jax.random.split(jax.random.PRNGKey(1), 4 * (rounds * calls + 2)))
    run_ours = lambda: act(variables, history, step, last_action, None, next(keys))  # noqa: E731
    run_bare = lambda: bare(variables, stacked, next(keys))  # noqa: E731

    compile_s = {}
    for name, fn in (("acting", run_ours), ("bare_mctx", run_bare)):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        compile_s[name] = time.perf_counter() - start
    ours, ref = 0.0, 0.0
    for _ in range(rounds):
        ours = max(ours, _best_rate(run_ours, batch, calls))
        ref = max(ref, _best_rate(run_bare, batch, calls))
    return ours, ref, compile_s


def bench_train(network, batch: int, rounds: int, calls: int):
    try:
        from moozi.core.train_step import OptimizerConfig, init_train_state, make_train_step
        from moozi.core.loss import LossConfig
        from moozi.core.types import TrainingTarget
    except ImportError as error:  # the learner is another issue's; report null until it lands
        print(f"train: skipped ({error})", file=sys.stderr)
        return None, None
    rng = np.random.default_rng(2)
    optimizer_config = OptimizerConfig()
    k, a = UNROLL, NUM_ACTIONS
    stacked_shape = (batch, *network.input_shape)
    probs = rng.random((batch, k + 1, a)).astype(np.float32)
    target = TrainingTarget(
        stacked_obs=jnp.asarray(rng.random(stacked_shape), jnp.float32),
        next_stacked_obs=jnp.asarray(rng.random(stacked_shape), jnp.float32),
        actions=jnp.asarray(rng.integers(0, a, (batch, k)), jnp.int32),
        rewards=jnp.asarray(rng.normal(size=(batch, k)), jnp.float32),
        action_probs=jnp.asarray(probs / probs.sum(-1, keepdims=True)),
        policy_mask=jnp.ones((batch, k + 1), jnp.float32),
        root_values=jnp.asarray(rng.normal(size=(batch, k + 1)), jnp.float32),
        partial_return=jnp.asarray(rng.normal(size=(batch, k + 1)), jnp.float32),
        bootstrap_discount=jnp.full((batch, k + 1), 0.997**10, jnp.float32),
        bootstrap_value=jnp.asarray(rng.normal(size=(batch, k + 1)), jnp.float32),
        consistency_mask=jnp.ones((batch,), jnp.float32),
        importance_weight=jnp.ones((batch,), jnp.float32),
    )
    state = init_train_state(network, optimizer_config, jax.random.PRNGKey(3), target.stacked_obs[:1])
    train_step = make_train_step(network, LossConfig(), optimizer_config)
    holder = {"state": state}
    key = jax.random.PRNGKey(4)

    def run():
        holder["state"], metrics, priorities = train_step(holder["state"], target, key)
        return priorities

    start = time.perf_counter()
    jax.block_until_ready(run())
    compile_s = time.perf_counter() - start
    rate = max(_best_rate(run, 1, calls) for _ in range(rounds))
    return rate, compile_s


def bench_replay():
    """Replay bytes per stored step (proportional sampling) of the MinAtar-shaped bench game."""
    try:
        from moozi.core.replay import ReplayBuffer, ReplayConfig
        from moozi.core.targets import TargetConfig
    except ImportError as error:
        print(f"replay: skipped ({error})", file=sys.stderr)
        return None
    spec = EnvSpec(name="minatar:bench", obs_shape=OBS_SHAPE, num_actions=NUM_ACTIONS, num_players=1, binary_obs=True)
    buffer = ReplayBuffer(
        ReplayConfig(capacity=10_000, min_fill=0), TargetConfig(history_length=HISTORY, num_unroll_steps=UNROLL), spec, 0
    )
    return float(buffer.bytes_per_step())


def bytes_per_stored_step_by_game() -> dict[str, dict[str, float]]:
    """Per game: replay bytes per stored step at its preset's sampling, as stored now (8-bit frames
    and binary planes as uint8) and as float32 observations would take (before issue 14)."""
    import dataclasses

    from moozi.builders import env_spec
    from moozi.config import build_config
    from moozi.core.replay import replay_bytes

    table = {}
    for game in ("atari:pong", "atari:breakout", "breakout", "asterix", "freeway", "seaquest", "space_invaders"):
        try:
            config = build_config(game)
            spec = env_spec(config)
        except Exception as error:  # a library that is not installed: say so, keep the rest
            print(f"bytes per step {game}: skipped ({str(error).splitlines()[0]})", file=sys.stderr)
            continue
        as_float = dataclasses.replace(spec, binary_obs=False, obs_levels=None)
        capacity = config.replay.capacity
        table[game] = {
            "stored": replay_bytes(config.replay, spec) / capacity,
            "float32_obs": replay_bytes(config.replay, as_float) / capacity,
            "capacity": capacity,
            "gib_at_capacity": round(replay_bytes(config.replay, spec) / 2**30, 2),
        }
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: batch 32, 8 simulations")
    parser.add_argument("--batch", type=int, default=None, help="B for acting and training (default 256; quick 32)")
    parser.add_argument("--simulations", type=int, default=None, help="search simulations (default 50; quick 8)")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds; the best round counts")
    parser.add_argument("--calls", type=int, default=1, help="calls per round")
    args = parser.parse_args(argv)
    batch = args.batch or (32 if args.quick else 256)
    simulations = args.simulations or (8 if args.quick else 50)
    calls = args.calls

    network = make_network(NetworkConfig(), obs_shape=OBS_SHAPE, history_length=HISTORY, num_actions=NUM_ACTIONS)
    variables = jax.jit(network.init)(jax.random.PRNGKey(0), jnp.zeros((1, *network.input_shape)))

    acting, bare, compile_s = bench_acting(network, variables, batch, simulations, args.rounds, calls)
    train, train_compile_s = bench_train(network, batch, args.rounds, calls)
    bytes_per_step = bench_replay()

    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), B={batch}, simulations={simulations}")
    print(f"acting     {acting:10.1f} searches/s   (compile {compile_s['acting']:.1f} s)")
    print(f"bare mctx  {bare:10.1f} searches/s   (compile {compile_s['bare_mctx']:.1f} s)")
    print(f"ratio      {acting / bare:10.3f}")
    if train is not None:
        print(f"train      {train:10.3f} steps/s       (K={UNROLL}, compile {train_compile_s:.1f} s)")
    if bytes_per_step is not None:
        print(f"replay     {bytes_per_step:10.1f} bytes/step")
    by_game = bytes_per_stored_step_by_game()
    for game, row in by_game.items():
        print(f"replay {game:16s} {row['stored']:9.1f} bytes/step stored ({row['float32_obs']:9.1f} with float32 obs); "
              f"{row['gib_at_capacity']:.2f} GiB at the preset's capacity {row['capacity']:,}")
    result = {
        "device": f"{jax.default_backend()}:{jax.devices()[0].device_kind}",
        "batch": batch,
        "num_simulations": simulations,
        "obs_shape": list(OBS_SHAPE),
        "num_actions": NUM_ACTIONS,
        "history_length": HISTORY,
        "acting_searches_per_s": round(acting, 2),
        "bare_mctx_searches_per_s": round(bare, 2),
        "acting_vs_bare_mctx": round(acting / bare, 4),
        "train_steps_per_s": None if train is None else round(train, 4),
        "train_batch": batch,
        "unroll_steps": UNROLL,
        "bytes_per_stored_step": bytes_per_step,
        "bytes_per_stored_step_by_game": by_game,
        "quick": bool(args.quick),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
