"""Env stepping throughput: each library's own loop vs moozi's bridges and VectorEnv (issue 2).

    python bench/envs.py [--quick] [--num-envs 64] [--processes 1,2] [--games tic_tac_toe,atari_pong]

For every game it times B envs (default 64) stepped with random legal actions,
resetting at episode ends, for the same number of steps:
- raw: the library's own loop, sequential over the B envs, calling what any
  agent needs each step: the step itself, the observation (OpenSpiel's
  observation_tensor, MinAtar's state(); Gymnasium returns it) and the legal
  actions where they change (OpenSpiel), returns at episode ends; for OpenSpiel
  an ended episode restarts on that env's next step, as in its rl_environment
  and in moozi, so both sides make the same moves in the same number of steps;
- single: the same loop over B moozi bridge envs (`env.step(action, is_last)`);
- P=1, P=2: one VectorEnv of the B envs stepped in-process and over 2 worker
  processes (construction and worker start-up are not timed).
Every runner gets the same untimed warm-up, and draws its random numbers
before its clock starts. The runners take turns for several rounds and each
one's best round counts, so a load change on a shared machine favours none of them.
Prints a table, then ONE JSON object on its last line.
Overhead at P=1 = time(ours at P=1) / time(raw) - 1; speed-up = P=2 steps/s / P=1 steps/s.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import random
import sys
import time
from typing import Callable

import numpy as np

# Workers are spawned and re-import this file: heavy imports stay inside functions.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------- runners
# Each runner builds its B envs once; `run(n)` times n batch steps and may be
# called again to continue. Rounds of all runners alternate and the best round
# counts, so a load change on a shared machine skews no runner in particular.


class RawOpenSpiel:
    """OpenSpiel's own loop. Episode ends work as in OpenSpiel's rl_environment (and
    moozi): the step that ends an episode gives the final observation and the
    returns, and that env's next step starts a new episode instead of moving. So
    both sides make the same moves and library calls in the same number of steps."""

    def __init__(self, name: str, num_envs: int, seed: int):
        import pyspiel

        self.game = pyspiel.load_game(name)
        self.states = [self.game.new_initial_state() for _ in range(num_envs)]
        self.legal = [s.legal_actions() for s in self.states]  # None: the episode has ended
        self.rng = np.random.default_rng(seed)

    def run(self, num_steps: int) -> float:
        states, legal, game = self.states, self.legal, self.game
        # Random numbers are drawn before the clock starts, as OursVector's scores are.
        uniforms = self.rng.random((num_steps, len(states))).tolist()
        start = time.perf_counter()
        for row in uniforms:
            for i, state in enumerate(states):
                actions = legal[i]
                if actions is None:
                    state = states[i] = game.new_initial_state()
                else:
                    state.apply_action(actions[int(row[i] * len(actions))])
                    if state.is_terminal():
                        state.returns()
                        state.observation_tensor(0)
                        legal[i] = None
                        continue
                state.observation_tensor(state.current_player())
                legal[i] = state.legal_actions()
        return time.perf_counter() - start


class RawMinAtar:
    def __init__(self, name: str, num_envs: int, seed: int):
        from minatar import Environment

        self.envs = [Environment(name, sticky_action_prob=0.1) for _ in range(num_envs)]
        for i, env in enumerate(self.envs):
            env.seed(seed + i)
            env.reset()
        self.action_set = self.envs[0].minimal_action_set()
        self.rng = np.random.default_rng(seed)

    def run(self, num_steps: int) -> float:
        envs, action_set = self.envs, self.action_set
        choices = self.rng.integers(0, len(action_set), (num_steps, len(envs))).tolist()
        start = time.perf_counter()
        for row in choices:
            for i, env in enumerate(envs):
                _, terminal = env.act(action_set[row[i]])
                if terminal:
                    env.reset()
                env.state()
        return time.perf_counter() - start


def _gym_env(name: str):
    import gymnasium

    if name != "pong":
        return gymnasium.make(name)
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing

    gymnasium.register_envs(ale_py)
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    env = gymnasium.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.25, full_action_space=False)
    # The bridge's exact wrapper settings, so the difference is moozi's layer alone.
    return AtariPreprocessing(
        env, noop_max=0, frame_skip=4, screen_size=84, terminal_on_life_loss=False, scale_obs=True
    )


class RawGym:
    def __init__(self, name: str, num_envs: int, seed: int):
        self.envs = [_gym_env(name) for _ in range(num_envs)]
        for i, env in enumerate(self.envs):
            env.reset(seed=seed + i)
        self.num_actions = int(self.envs[0].action_space.n)
        self.rng = np.random.default_rng(seed)

    def run(self, num_steps: int) -> float:
        envs = self.envs
        choices = self.rng.integers(0, self.num_actions, (num_steps, len(envs))).tolist()
        start = time.perf_counter()
        for row in choices:
            for i, env in enumerate(envs):
                _, _, terminated, truncated, _ = env.step(row[i])
                if terminated or truncated:
                    env.reset()
        return time.perf_counter() - start


class OursSingle:
    """The raw loop's shape over moozi bridge envs: `env.step(action, is_last)` one env at a time."""

    def __init__(self, make_env: Callable, num_envs: int, seed: int):
        self.envs = [make_env() for _ in range(num_envs)]
        self.outs = [env.reset(seed=seed + i) for i, env in enumerate(self.envs)]
        self.rnd = random.Random(seed)
        spec = self.envs[0].spec
        self.constant_mask = spec.num_players == 1  # every real action is legal: no need to read the mask
        self.num_actions = spec.num_actions

    def run(self, num_steps: int) -> float:
        envs, outs, rnd, n = self.envs, self.outs, self.rnd, self.num_actions
        start = time.perf_counter()
        for _ in range(num_steps):
            for i, env in enumerate(envs):
                out = outs[i]
                if self.constant_mask:
                    action = 1 + int(rnd.random() * (n - 1))
                else:
                    legal = np.flatnonzero(out.legal_actions)
                    action = int(legal[int(rnd.random() * len(legal))])
                outs[i] = env.step(action, out.is_last)
        return time.perf_counter() - start


class OursVector:
    """One VectorEnv of the B envs, with a random legal action per env from the batched mask."""

    def __init__(self, make_env: Callable, num_envs: int, seed: int, num_processes: int):
        from moozi.envs.vector import VectorEnv

        self.vec = VectorEnv(make_env, num_envs, num_processes=num_processes, seed=seed)
        self.out = self.vec.reset()
        self.rng = np.random.default_rng(seed)

    def run(self, num_steps: int) -> float:
        vec, out = self.vec, self.out
        scores = self.rng.random((num_steps, vec.num_envs, vec.spec.num_actions))
        start = time.perf_counter()
        for t in range(num_steps):
            # argmax of random scores over the legal set (on last steps the dummy, the only legal one).
            out = vec.step(np.argmax(scores[t] * out.legal_actions, axis=1), out.is_last)
        seconds = time.perf_counter() - start
        self.out = out
        return seconds

    def close(self) -> None:
        self.vec.close()


# ---------------------------------------------------------------- games
@dataclasses.dataclass(frozen=True)
class Game:
    """One benchmarked game."""

    label: str  # the row name
    make_env: Callable  # picklable factory of one moozi env
    raw: Callable  # (num_envs, seed) -> a runner of the library's own loop
    num_steps: int  # batch steps per round in the default run (--quick: a fifth)


def games() -> list[Game]:
    from moozi.envs import gym as gym_bridge
    from moozi.envs import minatar, openspiel

    p = functools.partial
    return [
        Game("tic_tac_toe", p(openspiel.make, "tic_tac_toe"), p(RawOpenSpiel, "tic_tac_toe"), 400),
        Game("connect_four", p(openspiel.make, "connect_four"), p(RawOpenSpiel, "connect_four"), 200),
        Game("minatar_breakout", p(minatar.make, "breakout"), p(RawMinAtar, "breakout"), 200),
        Game("cartpole", p(gym_bridge.make_gym, "CartPole-v1"), p(RawGym, "CartPole-v1"), 200),
        Game("atari_pong", p(gym_bridge.make_atari, "pong"), p(RawGym, "pong"), 12),
    ]


def bench_game(game: Game, num_envs: int, num_steps: int, rounds: int, processes: list[int], seed: int = 0) -> dict:
    runners = {"raw": game.raw(num_envs, seed), "single": OursSingle(game.make_env, num_envs, seed)}
    runners.update({f"p{p}": OursVector(game.make_env, num_envs, seed, p) for p in processes})
    best = {name: float("inf") for name in runners}
    try:
        for runner in runners.values():
            runner.run(max(2, num_steps // 10))  # the same untimed warm-up for every runner
        for _ in range(rounds):
            for name, runner in runners.items():
                best[name] = min(best[name], runner.run(num_steps))
    finally:
        for runner in runners.values():
            if isinstance(runner, OursVector):
                runner.close()
    total = num_envs * num_steps
    result = {"env_steps_per_round": total, "rounds": rounds}
    result.update({f"{name}_steps_per_s": total / seconds for name, seconds in best.items()})
    for p in processes:
        result[f"p{p}_ms_per_batch_step"] = 1e3 * best[f"p{p}"] / num_steps
    if 1 in processes:
        result["overhead_p1"] = best["p1"] / best["raw"] - 1.0
    if 1 in processes and 2 in processes:
        result["speedup_p2_over_p1"] = best["p1"] / best["p2"]
    return result


def _busy_loop(iterations: int) -> None:
    total = 0
    for i in range(iterations):
        total += i


def machine_parallel_speedup(iterations: int = 20_000_000) -> float:
    """How much faster two CPU-bound processes finish side by side than one after the other.

    The ceiling for any P = 2 speed-up on this machine: 2.0 with two free
    cores, ~1.0 where the cores are shared or the VM is throttled.
    """
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    # Both timings include starting the processes, so start-up cancels out.
    start = time.perf_counter()
    for _ in range(2):
        process = context.Process(target=_busy_loop, args=(iterations,))
        process.start()
        process.join()
    serial = time.perf_counter() - start
    start = time.perf_counter()
    processes = [context.Process(target=_busy_loop, args=(iterations,)) for _ in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    return serial / (time.perf_counter() - start)


# Presets whose acting step the cheap games' env step is compared with (issue 2: under 5%).
ACTING_PRESETS = {"minatar_breakout": "breakout", "cartpole": "cartpole"}


def acting_ms_per_step(preset: str, num_envs: int, repeats: int = 5) -> float:
    """Milliseconds of one acting step (history + inference + search) of B envs at the preset's simulations."""
    import jax

    from moozi.config import build_config
    from moozi.core.acting import make_muzero_act
    from moozi.core.train_step import init_train_state
    from moozi.core.history import init_history
    from moozi.builders import build_network, env_spec, example_stacked_obs, seed_key
    from moozi.builders import make_vector_env

    config = build_config(preset)
    spec = env_spec(config)
    network = build_network(config, spec)
    state = init_train_state(network, config.optimizer, seed_key(0, 0), example_stacked_obs(config, spec))
    params = {"params": state.params, "batch_stats": state.batch_stats}
    act = jax.jit(make_muzero_act(network, config.planner, spec, config.targets.history_length))
    env = make_vector_env(config, num_envs, seed=0)
    try:
        step = env.reset()
        history = init_history(num_envs, config.targets.history_length, spec.obs_shape)
        last = np.zeros(num_envs, np.int32)
        key = jax.random.key(0)
        history, out = act(params, history, step, last, None, key)  # compile
        jax.block_until_ready(out)
        best = float("inf")
        for i in range(repeats):
            start = time.perf_counter()
            history, out = act(params, history, step, last, None, jax.random.fold_in(key, i))
            jax.block_until_ready(out)
            best = min(best, time.perf_counter() - start)
        return 1e3 * best
    finally:
        env.close()


def _table(results: dict, processes: list[int]) -> str:
    columns = ["raw/s", "single/s"] + [f"P={p}/s" for p in processes] + [f"ms/step P={p}" for p in processes]
    columns += ["overhead P=1", "P=2/P=1"]
    lines = [f"{'game':<18}" + "".join(f"{c:>14}" for c in columns)]
    for label, r in results.items():
        cells = [f"{r['raw_steps_per_s']:14.0f}", f"{r['single_steps_per_s']:14.0f}"]
        cells += [f"{r[f'p{p}_steps_per_s']:14.0f}" for p in processes]
        cells += [f"{r[f'p{p}_ms_per_batch_step']:14.2f}" for p in processes]
        cells.append(f"{100 * r['overhead_p1']:13.1f}%" if "overhead_p1" in r else f"{'-':>14}")
        cells.append(f"{r['speedup_p2_over_p1']:13.2f}x" if "speedup_p2_over_p1" in r else f"{'-':>14}")
        lines.append(f"{label:<18}" + "".join(cells))
    for label, r in results.items():
        if "acting_ms_per_batch_step" in r:
            lines.append(
                f"{label}: one VectorEnv step (P=1) {r['p1_ms_per_batch_step']:.2f} ms = "
                f"{100 * r['env_step_share_of_acting']:.1f}% of one acting step of the same batch "
                f"({r['acting_ms_per_batch_step']:.1f} ms at the preset's simulations)"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: B=16, a fifth of the steps, 2 rounds")
    parser.add_argument(
        "--rounds", type=int, default=None, help="alternating timed rounds per runner; best counts (3; --quick: 2)"
    )
    parser.add_argument("--num-envs", type=int, default=None, help="B, the batch of envs (default 64; 16 with --quick)")
    parser.add_argument("--processes", default="1,2", help="comma-separated worker counts P to time")
    parser.add_argument("--games", default="", help="comma-separated subset of the game labels")
    args = parser.parse_args(argv)
    if args.num_envs is None:
        args.num_envs = 16 if args.quick else 64
    processes = [int(p) for p in args.processes.split(",") if p]
    chosen = [g for g in games() if not args.games or g.label in args.games.split(",")]
    results = {}
    for game in chosen:
        num_steps = max(2, game.num_steps // 5) if args.quick else game.num_steps
        print(f"benchmarking {game.label}: B={args.num_envs}, {num_steps} batch steps a round", file=sys.stderr)
        rounds = args.rounds if args.rounds is not None else (2 if args.quick else 3)
        results[game.label] = bench_game(game, args.num_envs, num_steps, rounds, processes)
        if game.label in ACTING_PRESETS and 1 in processes:
            acting_ms = acting_ms_per_step(ACTING_PRESETS[game.label], args.num_envs)
            results[game.label]["acting_ms_per_batch_step"] = acting_ms
            results[game.label]["env_step_share_of_acting"] = results[game.label]["p1_ms_per_batch_step"] / acting_ms
    print(_table(results, processes))
    report = {
        "benchmark": "envs",
        "num_envs": args.num_envs,
        "processes": processes,
        "quick": args.quick,
        "cpu_count": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
        "machine_parallel_speedup": round(machine_parallel_speedup(), 3) if 2 in processes else None,
        "games": {k: {n: round(v, 4) if isinstance(v, float) else v for n, v in r.items()} for k, r in results.items()},
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
