"""Where one self-play iteration and one learner update spend their time: per compiled program, per part.

    python bench/selfplay_profile.py [--cases go9,connect_four,connect_four_alphazero] [--tiny]
                                     [--repeats 5] [--warmup-iterations 2] [--statistic median|min]
                                     [--set KEY=VALUE ...] [--out FILE]

Cases (`moozi train GAME` as the preset resolves it; `--set` applies to every case):
- go9: AlphaZero mode on pgx's go_9x9 (the Anakin path: the whole self-play segment is one program);
- connect_four: MuZero on OpenSpiel's Connect Four (the host path: a jitted act beside host envs);
- connect_four_alphazero: `--set agent=alphazero`, AlphaZero mode on pgx:connect_four (Anakin).
Sizes are the preset's: batch B = env.num_envs, its simulations (and playout cap randomisation's fast
searches), its network, T = train.rollout_steps steps per iteration, the learner's batch and unroll.
`--tiny` shrinks them (4 channels, 1 block, B = 4, 4 simulations, T = 3, learner batch 8) to check the
script end to end (about a minute on 2 CPU cores, mostly compiling). Parameters are freshly
initialised: a program's cost does not depend on their values, except that the search tree's shape
(how deep simulations go) does. Every program is lowered first and all are compiled together on
threads (one per core), then the worker's self-play runs the very programs analysed (the segment,
or the host path's act, compiled here and put in the place of the worker's own).

For each case:
1. programs: every compiled program of the iteration and of the learner (the self-play segment or
   the host path's act, the act with the full and the fast search alone, the train step): wall time
   per call (min and median over --repeats calls after one warm-up call, each waited on with
   block_until_ready), FLOPs per call from XLA's cost analysis of the compiled program, the GFLOP/s
   that makes at the median time (--statistic min: the min), and that over the matmul rate of this
   run (`efficiency`). XLA counts a while loop's body once (checked each run against the FLOPs of
   the root's and one simulation's calls: `flops_search_loop_body_counted_once`), so the search's
   FLOPs per call are XLA's + (N - 1) x a simulation's parts (the network, and in AlphaZero mode the
   history and the env step; the tree's own arithmetic counted once), and the segment's (a scan over
   T steps) are its acts' and env steps'; XLA's own number is beside them (`flops_xla_analysed`).
   The parts' FLOPs are XLA's analysis of one call's unoptimised program (lowered, not compiled a
   second time).
2. parts of one self-play iteration, each with its time per call, calls per iteration, time per
   iteration and share of the iteration's wall time (median, or --statistic min, of --repeats
   iterations, each from the same saved worker state: the same games, the same coins of playout cap
   randomisation):
   - network_root: the representation (+ prediction) call on the B root inputs, one per step;
   - network_in_search: the network inside the search, one per simulation: AlphaZero's initial
     inference on the node's history, MuZero's recurrent inference (dynamics + prediction);
   - history_stacking: pushing an observation and building the stacked input, once per step at the
     root and, in AlphaZero mode, once per simulation (each expanded node's history);
   - env_step_in_search (AlphaZero): the game's step, vmapped over B, once per simulation;
   - tree_ops: mctx's search with a stub model (same embedding, so the tree stores what the real one
     stores; no network, no env step; outputs constant): selection, expansion bookkeeping, backups,
     the root's Gumbel / Dirichlet work and the search's statistics. The stub's tree can have another
     shape than the real one's, so this is approximate;
   - search_rest (difference): the act programs' time minus the parts above: the model's glue
     (masks, wheres), the capped act's branch, and whatever fusing the parts into one program gains
     (negative) or loses;
   - env_step_selfplay (Anakin): the vmapped env step of the B self-play envs, once per step;
     env_step_host (host path): the host VectorEnv's step, measured alone on an env of its own;
   - segment_rest (difference, Anakin): the segment minus its acts and env steps (exploration, the
     step records, the scan);
   - host_python (difference): the iteration's wall time minus the compiled calls (Anakin: minus the
     segment; the host path: minus the acts and the host env steps): the upload of the parameters
     (a worker is handed host arrays: once per segment, or on every act call of the host path),
     copying results back, cutting trajectories, Python.
   The per-call parts are measured alone at the same batch B, on the iteration's own inputs, as n
   calls inside one compiled loop (n = the simulations), each call's inputs touched by one
   elementwise op that depends on a sum over the previous call's outputs (so XLA can neither hoist
   nor merge calls). What that harness costs per call is measured beside each part (`harness`: the
   same loop around a part that does nothing) and is included in the part's time, not taken off.
   Shares of all parts sum to 1 because the difference parts close the sum; `measured_share` is the
   share the parts measured alone explain. `checks` brackets: the real search minus the stub search
   (the model's work inside the search, by difference) against the model's calls measured alone, and
   the segment against its acts and env steps.
3. learner: the train step (compiled, at the preset's batch and unroll; every repeat from the same
   initial parameters), the role's update around it (difference: finiteness checks and copying
   metrics back), replay sampling (numpy gather + the jitted target assembly + symmetry
   augmentation), priority updates, and the replay insert of one iteration's T x B steps (host
   numpy, not a compiled program), on a buffer of synthetic episodes.
4. conv3x3: one of the trunk's 3x3 convolutions (channels -> channels on the board) as
   `lax.conv_general_dilated` in NHWC and as im2col (bench/conv_forms.py), forward at the search's
   batch B and forward + backward at the learner's batch, each timed as n convolutions in one
   compiled loop, with analytic and XLA FLOPs, GFLOP/s, the share of the matmul rate, and the largest
   difference between the two forms' outputs and gradients.
The matmul rate is bench/selfplay.py's `matmul_flops_per_s` (float32 2048 x 2048, best of 5),
measured at the start (provenance) and at the end; `efficiency` divides by the better of the two.
Prints a table on stderr and ONE JSON object on stdout's last line; `--out FILE` also writes it
(atomically). Not a bench/results/ file: results_page.py has no adapter for it, so --out refuses
that folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import pathlib
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bench.provenance import write_result  # noqa: E402
from bench.selfplay import flops_of  # noqa: E402

CASES = {
    "go9": ("go9", {}),
    "connect_four": ("connect_four", {}),
    "connect_four_alphazero": ("connect_four", {"agent": "alphazero"}),
}
# Seconds per case on a CPU, the trunk kept convolutional (so the conv question has a board to ask on).
TINY = {
    "network.channels": 4, "network.representation_blocks": 1, "network.dynamics_blocks": 1,
    "network.head_hidden": 8, "env.num_envs": 4, "planner.num_simulations": 4, "planner.fast_simulations": 2,
    "train.rollout_steps": 3, "train.batch_size": 8, "train.updates_per_iteration": 2,
    "replay.capacity": 2000, "replay.min_fill": 40,
}
MATMUL_SIZE = 2048
RESULTS_DIR = ROOT / "bench" / "results"


# ---------------------------------------------------------------- timing and FLOPs


_T0 = time.perf_counter()


def _log(message: str) -> None:
    """Progress on stderr, with the seconds since the script started."""
    print(f"  [{time.perf_counter() - _T0:7.1f} s] {message}", file=sys.stderr, flush=True)


def _stats(seconds: list[float]) -> dict:
    return {"min": min(seconds), "median": statistics.median(seconds), "repeats": len(seconds)}


STATISTIC = "median"  # which of a timing's statistics the parts, shares and GFLOP/s use (--statistic)


def typical(stats: dict) -> float:
    return stats[STATISTIC]


def time_calls(call, repeats: int, warmup: int = 1) -> dict:
    """min/median seconds of `call()` over `repeats` calls after `warmup` calls, each waited on."""
    for _ in range(warmup):
        jax.block_until_ready(call())
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        seconds.append(time.perf_counter() - start)
    return _stats(seconds)


def _checksum(tree):
    """One float32 scalar depending on every floating leaf of `tree` (what the next call's inputs depend on)."""
    total = jnp.float32(0.0)
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            total = total + jnp.sum(leaf).astype(jnp.float32)
    return total


def _nudge(tree, amount):
    """Every leaf of `tree` plus `amount` (a float32 scalar that is 0 when the program runs, unknown to
    XLA when it compiles): the same values, made to depend on `amount`. Keys through their data."""
    def one(leaf):
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            data = jax.random.key_data(leaf)
            return jax.random.wrap_key_data(data + amount.astype(data.dtype), impl=jax.random.key_impl(leaf))
        if leaf.dtype == jnp.bool_:
            return leaf ^ (amount != 0)
        return leaf + amount.astype(leaf.dtype)

    return jax.tree.map(one, tree)


def looped(f, calls: int):
    """jit(run(fixed, data, zero)): `f(fixed, *data)` `calls` times in one compiled loop, each call's
    `data` nudged by the last call's outputs (`zero` = 0.0 at run time), so that XLA can neither hoist
    the calls out of the loop nor merge them."""
    def run(fixed, data, zero):
        def body(_, carry):
            data, total = carry
            checksum = _checksum(f(fixed, *data))
            amount = jnp.where(zero > 0, checksum, jnp.float32(0.0))
            return _nudge(data, amount), total + checksum

        return jax.lax.fori_loop(0, calls, body, (data, jnp.float32(0.0)))[1]

    return jax.jit(run)


@dataclasses.dataclass
class Measured:
    """A part or program measured alone: seconds per call (min, median) and FLOPs per call."""

    seconds: dict
    flops: float = 0.0
    note: str = ""

    @property
    def typical(self) -> float:
        return typical(self.seconds)


class Compiler:
    """Programs lowered one by one (tracing holds the GIL), then compiled all at once on threads (XLA
    compiles without it), so that on a machine with several cores they compile side by side."""

    def __init__(self):
        self._lowered: dict = {}
        self._compiled: dict = {}
        self.seconds = 0.0

    def lower(self, name: str, f, *args) -> None:
        self._lowered[name] = jax.jit(f).lower(*args)

    def add(self, name: str, lowered) -> None:
        self._lowered[name] = lowered

    def compile_all(self) -> None:
        start = time.perf_counter()
        workers = max(1, min(len(self._lowered), os.cpu_count() or 1))
        with ThreadPoolExecutor(workers) as pool:
            futures = {name: pool.submit(lowered.compile) for name, lowered in self._lowered.items()}
            for name, future in futures.items():
                self._compiled[name] = future.result()
        self._lowered = {}
        self.seconds += time.perf_counter() - start
        _log(f"compiled {len(futures)} programs on {workers} threads ({time.perf_counter() - start:.1f} s)")

    def __getitem__(self, name: str):
        return self._compiled[name]

    def __contains__(self, name: str) -> bool:
        return name in self._compiled


@dataclasses.dataclass
class LoopedPart:
    """A part lowered as `calls` calls in one loop (`looped`), with XLA's FLOPs of one call."""

    calls: int
    flops: float
    note: str


def _harness_part(outputs):
    """A part that does no work: it returns arrays of the real part's floating outputs (`outputs`: their
    shapes and dtypes), filled with one scalar read from the inputs. Looped like the real one, it times
    the loop's own cost per call: the nudges of the inputs, the checksum, the loop."""
    floating = [leaf for leaf in jax.tree.leaves(outputs) if jnp.issubdtype(leaf.dtype, jnp.floating)]

    def nothing(fixed, *data):
        anchor = _checksum(jax.tree.map(lambda a: a.ravel()[:1], data))
        return [jnp.broadcast_to(anchor, leaf.shape).astype(leaf.dtype) for leaf in floating]

    return nothing


def lower_looped(compiler: Compiler, name: str, f, fixed, data: tuple, calls: int, note: str) -> LoopedPart:
    """Lowers `looped(f, calls)` and the same loop around a part that does nothing (`_harness_part`) for
    the compiler; FLOPs per call from XLA's analysis of one call's unoptimised program (no second
    compile)."""
    zero = np.float32(0.0)
    one_call = jax.jit(f).lower(fixed, *data)
    compiler.add(name, looped(f, calls).lower(fixed, data, zero))
    compiler.add(f"{name}/harness", looped(_harness_part(one_call.out_info), calls).lower(fixed, data, zero))
    return LoopedPart(calls, flops_of(one_call), note)


def time_looped(compiler: Compiler, name: str, part: LoopedPart, fixed, data: tuple, repeats: int) -> Measured:
    """Seconds per call of a looped part: the loop's time / its calls. Beside them (`harness`), the same
    per call of the loop around a part that does nothing: what the measuring adds (included above)."""
    zero = np.float32(0.0)
    per_call = {}
    for program, key in ((name, None), (f"{name}/harness", "harness")):
        compiled = compiler[program]
        seconds = time_calls(lambda: compiled(fixed, data, zero), repeats)
        stats = {"min": seconds["min"] / part.calls, "median": seconds["median"] / part.calls}
        if key is None:
            per_call.update(stats, repeats=seconds["repeats"], loop_calls=part.calls)
        else:
            per_call[key] = stats
    return Measured(per_call, part.flops, part.note)


def time_program(compiled, args: tuple, repeats: int, note: str = "") -> Measured:
    """A single-call compiled program timed call by call, with XLA's FLOPs of it."""
    return Measured(time_calls(lambda: compiled(*args), repeats), flops_of(compiled), note)


def matmul_gflops(rounds: int = 5) -> float:
    from bench.selfplay import matmul_flops_per_s

    return round(matmul_flops_per_s(MATMUL_SIZE, rounds) / 1e9, 1)


def loop_body_counted_once(analysed: float, root_flops: float, simulation_flops: float, simulations: int) -> bool:
    """Whether XLA's analysis of a search program (`analysed` FLOPs) is nearer the root's evaluation plus
    ONE simulation than plus all N of them: whether it counted the simulation loop's body once (XLA does
    not know a while loop's trip count) or, where a compiler unrolled the loop, N times."""
    once = root_flops + simulation_flops
    every = root_flops + simulations * simulation_flops
    return abs(analysed - once) <= abs(analysed - every)


# ---------------------------------------------------------------- configs


def case_config(name: str, tiny: bool, sets: dict):
    from moozi.config import build_config

    if name not in CASES:
        raise SystemExit(f"selfplay_profile: unknown case {name!r}; cases: {', '.join(CASES)}")
    game, overrides = CASES[name]
    return build_config(game, overrides={**(TINY if tiny else {}), **overrides, **sets})


def _parse_sets(items: list[str]) -> dict:
    sets = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"selfplay_profile: --set wants KEY=VALUE, got {item!r}")
        sets[key.strip()] = value.strip()
    return sets


# ---------------------------------------------------------------- one case


class _Installed:
    """A compiled program in the place of a worker's jitted one: the worker runs the very program
    analysed here, compiled once. The segment's static `num_steps` is checked, not passed."""

    def __init__(self, compiled, num_steps: int | None = None):
        self.compiled, self.num_steps = compiled, num_steps

    def __call__(self, *args, num_steps: int | None = None):
        if num_steps != self.num_steps:
            raise ValueError(f"compiled for {self.num_steps} steps, asked for {num_steps}")
        return self.compiled(*args)


def _random_legal(legal, seed: int = 0) -> np.ndarray:
    from moozi.envs.base import random_legal_actions

    return random_legal_actions(np.random.default_rng(seed), np.asarray(legal))


class _Case:
    """One game/agent's pieces, built from its config: spec, network, planners, env."""

    def __init__(self, config):
        from moozi.builders import build_network, env_options, env_spec, fast_planner_config, searches_env_state
        from moozi.core.planner import search_discount
        from moozi.envs.registry import is_jax_native, make_env

        self.config = config
        self.spec = env_spec(config)
        self.network = build_network(config, self.spec)
        self.alphazero = searches_env_state(config)
        self.anakin = is_jax_native(config.game)
        self.A, self.B = self.spec.num_actions, config.env.num_envs
        self.T = config.train.rollout_steps
        self.planner_full = config.planner
        self.planner_fast = fast_planner_config(config.planner)
        self.N_full = self.planner_full.num_simulations
        self.N_fast = self.planner_fast.num_simulations if self.planner_fast else 0
        self.share = config.planner.full_search_share
        self.discount = search_discount(self.planner_full, self.spec)
        self.env = make_env(config.game, **env_options(config)) if self.alphazero else None

    def inputs(self, params, history, step, last_action, env_state, key) -> dict:
        """Every program's and part's arguments, from the acting inputs of one step (values or shapes)."""
        from moozi.core.alphazero import PerfectModelEmbedding, PerfectModelRoot
        from moozi.core.planner import AbsorbingEmbedding

        B, A = self.B, self.A
        root_history = _jit_push(history, step.obs, step.is_first, last_action)
        stacked = _jit_stack(root_history, A)
        actions = jnp.asarray(_random_legal(step.legal_actions), jnp.int32)
        is_last, to_play = jnp.asarray(step.is_last, bool), jnp.asarray(step.to_play, jnp.int32)
        env_keys = jax.random.split(jax.random.key(2), B)
        out = {
            "act": (params, history, step, last_action, env_state if self.alphazero else None, key),
            "history_stacking": (None, (history, jnp.asarray(step.obs), jnp.asarray(step.is_first),
                                        jnp.asarray(last_action))),
            "network_initial": (params, (stacked,)),
            "legal": jnp.asarray(step.legal_actions),
        }
        if self.alphazero:
            out["env_step_in_search"] = (None, (env_state, actions, env_keys))
            out["root_input"] = PerfectModelRoot(env_state, root_history, is_last, to_play)
            out["embedding"] = PerfectModelEmbedding(env_state, root_history, is_last, to_play)
        else:
            # A hidden state's values do not change what the network costs: uniform in [0, 1] as scaled ones are.
            hidden = jnp.asarray(np.random.default_rng(3).random((B, *self.network.hidden_state_shape)), jnp.float32)
            out["network_recurrent"] = (params, (hidden, actions))
            out["root_input"] = stacked
            out["embedding"] = AbsorbingEmbedding(hidden, jnp.zeros((B,), bool))
        if self.anakin:
            out["env_step_selfplay"] = (None, (env_state, actions, is_last, env_keys))
        out["actions"] = actions
        return out

    def looped_parts(self) -> dict:
        """name -> (f(fixed, *data), note) of the parts measured alone in compiled loops."""
        from moozi.core.history import history_input, push_history

        network, A, B = self.network, self.A, self.B
        parts = {
            "history_stacking": (lambda _, h, obs, first, last: history_input(push_history(h, obs, first, last), A),
                                 "push one observation, build the stacked input"),
            "network_initial": (lambda p, x: network.initial_inference(p, x),
                                "representation + prediction on B stacked inputs"),
        }
        if self.alphazero:
            no_reset = jnp.zeros((B,), bool)
            env = self.env
            parts["env_step_in_search"] = (lambda _, s, a, k: jax.vmap(env.step)(s, a, no_reset, k),
                                           "the game's step vmapped over B, no reset")
        else:
            parts["network_recurrent"] = (lambda p, h, a: network.recurrent_inference(p, h, a),
                                          "dynamics + prediction on B hidden states")
        if self.anakin:
            env = self.env if self.env is not None else _anakin_env(self.config)
            parts["env_step_selfplay"] = (lambda _, s, a, last, k: jax.vmap(env.step)(s, a, last, k),
                                          "the B self-play envs' step (resets where is_last)")
        return parts


def _anakin_env(config):
    from moozi.builders import env_options
    from moozi.envs.registry import make_env

    return make_env(config.game, **env_options(config))


@jax.jit
def _jit_push(history, obs, is_first, last_action):
    from moozi.core.history import push_history

    return push_history(history, obs, is_first, last_action)


@functools.partial(jax.jit, static_argnums=1)
def _jit_stack(history, num_actions: int):
    from moozi.core.history import history_input

    return history_input(history, num_actions)


def profile_case(name: str, config, repeats: int, warmup_iterations: int, matmul: float) -> dict:
    from moozi.builders import make_act, make_self_play_act
    from moozi.config import epsilon_at
    from moozi.config.loading import config_to_dict
    from moozi.core.planner import make_planner
    from moozi.training.roles.parameter_optimizer import ParameterOptimizer
    from bench.provenance import config_record

    case = _Case(config)
    spec, A, B, T = case.spec, case.A, case.B, case.T
    anakin, alphazero = case.anakin, case.alphazero
    N_full, N_fast, share = case.N_full, case.N_fast, case.share
    planner_full, planner_fast = case.planner_full, case.planner_fast
    path = "anakin" if anakin else "host"
    print(f"\n{name}: {config.agent} on {config.game} ({path} path), B={B}, {N_full} simulations"
          + (f" ({N_fast} fast, full share {share})" if planner_fast else "") + f", T={T}", file=sys.stderr)

    optimizer = ParameterOptimizer(config)
    host_params = optimizer.get_params()  # what a training worker is handed (host arrays)
    params = jax.device_put(host_params)
    _log("built the learner and its initial parameters")

    # ---- the worker and the acting inputs of its first step
    if anakin:
        from moozi.training.roles.anakin_self_play import AnakinRolloutWorker

        worker = AnakinRolloutWorker(config)
        carry = worker._carry
        history, step, last_action, env_state = carry.history, carry.step, carry.last_action, carry.env_state
    else:
        from moozi.training.roles.self_play import TrainingRolloutWorker

        worker = TrainingRolloutWorker(config)
        worker._step = worker.env.reset()  # what its first run does
        history, step, last_action = worker._history, worker._step, worker._last_action
        env_state = worker.env.state if alphazero else None
    try:
        # ---- lower every program, compile them together
        compiler = Compiler()
        key = jax.random.key(1)
        inputs = case.inputs(params, history, step, last_action, env_state, key)
        act_fns = {"act_full": make_act(config, spec, planner_full)}
        if planner_fast is not None:
            act_fns["act_fast"] = make_act(config, spec, planner_fast)
            if not anakin:  # the host worker's own program: the capped act
                act_fns["selfplay_act"] = make_self_play_act(config, spec)
        for program, f in act_fns.items():
            compiler.lower(program, f, *inputs["act"])
        if anakin:
            epsilon = np.float32(epsilon_at(config.train, worker.env_steps))
            compiler.add("selfplay_segment", worker._segment.lower(params, carry, key, epsilon, num_steps=T))
        calls = max(N_full, 2)
        looped_parts = {part: lower_looped(compiler, part, f, *inputs[part], calls, note)
                        for part, (f, note) in case.looped_parts().items()}
        stub = _stub_model(case)
        stub_planners = {"tree_full": make_planner(planner_full, stub)}
        if planner_fast is not None:
            stub_planners["tree_fast"] = make_planner(planner_fast, stub)
        stub_args = (params, jax.random.key(4), inputs["root_input"], inputs["legal"])
        for part, planner in stub_planners.items():
            compiler.lower(part, planner, *stub_args)
        learner = prepare_learner(config, optimizer, compiler)
        conv = prepare_conv(config, case.network, B, compiler)
        _log(f"lowered {len(compiler._lowered)} programs")
        compiler.compile_all()

        # ---- the iterations: warm-up, then each timed one from the same saved state
        if anakin:
            worker._segment = _Installed(compiler["selfplay_segment"], T)
        else:
            worker._act = _Installed(compiler["selfplay_act" if "selfplay_act" in compiler else "act_full"])
        for _ in range(warmup_iterations):
            worker.run(host_params, T, 0)
        iteration_seconds = []
        if anakin:
            state0 = worker.state_dict()
            for _ in range(repeats):
                worker.load_state_dict(state0)
                jax.block_until_ready(worker._carry)
                start = time.perf_counter()
                worker.run(host_params, T, 0)
                iteration_seconds.append(time.perf_counter() - start)
            worker.load_state_dict(state0)
            carry = worker._carry
            key = jax.random.split(worker._rng)[1]
            epsilon = np.float32(epsilon_at(config.train, worker.env_steps))
            history, step, last_action, env_state = carry.history, carry.step, carry.last_action, carry.env_state
        else:
            for _ in range(repeats):
                start = time.perf_counter()
                worker.run(host_params, T, 0)
                iteration_seconds.append(time.perf_counter() - start)
            history, step, last_action = worker._history, worker._step, worker._last_action
            env_state = worker.env.state if alphazero else None
        iteration = _stats(iteration_seconds)
        _log("timed the self-play iterations")

        # ---- every program and part, on the inputs the iterations reached
        inputs = case.inputs(params, history, step, last_action, env_state, key)
        if anakin:
            segment_args = (params, carry, key, epsilon)
            segment = time_program(compiler["selfplay_segment"], segment_args, repeats,
                                   f"{T} steps of B={B} envs in one scan")
            _, records = compiler["selfplay_segment"](*segment_args)
            full_steps = int(np.sum(np.asarray(records.action_probs).sum(axis=(1, 2)) > 0))
        else:
            full_steps = T * share  # the host path's coins are not read back: the expected number
        fast_steps = T - full_steps
        acts = {program: time_program(compiler[program], inputs["act"], repeats) for program in act_fns}
        act_full, act_fast = acts["act_full"], acts.get("act_fast")
        act_full.note = f"one search of {N_full} simulations at B={B}"
        if act_fast:
            act_fast.note = f"one fast search of {N_fast} simulations at B={B}"
        if "selfplay_act" in acts:
            acts["selfplay_act"].note = "the worker's capped act (a coin picks the full or the fast search)"
        parts_measured = {part: time_looped(compiler, part, spec_, *inputs[part], repeats)
                          for part, spec_ in looped_parts.items()}
        stub_args = (params, jax.random.key(4), inputs["root_input"], inputs["legal"])
        tree_full = time_program(compiler["tree_full"], stub_args, repeats)
        tree_fast = time_program(compiler["tree_fast"], stub_args, repeats) if "tree_fast" in stub_planners else None
        host_env = None if anakin else _time_host_env(config, B, T, repeats)
        _log("timed the self-play programs and parts")
    finally:
        worker.close()

    # ---- FLOPs: where XLA analysed the search's loop body once, count its other N - 1 simulations,
    # each the FLOPs of a simulation's parts (the model's wheres and masks left out)
    root_flops = parts_measured["network_initial"].flops + parts_measured["history_stacking"].flops
    if alphazero:
        recurrent_flops = root_flops + parts_measured["env_step_in_search"].flops
    else:
        recurrent_flops = parts_measured["network_recurrent"].flops
    counted_once = loop_body_counted_once(act_full.flops, root_flops, recurrent_flops, N_full)

    def search_flops(m: Measured, simulations: int) -> float:
        return m.flops + (simulations - 1) * recurrent_flops if counted_once else m.flops

    def program_row(m: Measured, flops: float | None = None, **extra) -> dict:
        flops = m.flops if flops is None else flops
        gflops = flops / m.typical / 1e9 if flops and m.typical > 0 else 0.0
        return {"seconds": m.seconds, "flops_per_call": flops, "gflops_per_s": gflops,
                "efficiency": gflops / matmul if matmul else 0.0, **({"note": m.note} if m.note else {}), **extra}

    programs: dict[str, dict] = {}
    act_full_flops = search_flops(act_full, N_full)
    act_fast_flops = search_flops(act_fast, N_fast) if act_fast else 0.0
    programs["act_full"] = program_row(act_full, act_full_flops, flops_xla_analysed=act_full.flops)
    if not anakin and planner_fast is None:
        programs["act_full"]["note"] += "; the host worker's own self-play program"
    if act_fast:
        programs["act_fast"] = program_row(act_fast, act_fast_flops, flops_xla_analysed=act_fast.flops)
    if anakin:
        env_flops = parts_measured["env_step_selfplay"].flops
        # Counted from its parts whatever XLA does with the scan over T (and the capped act's branches).
        segment_flops = full_steps * act_full_flops + fast_steps * act_fast_flops + T * env_flops
        programs["selfplay_segment"] = program_row(segment, segment_flops, flops_xla_analysed=segment.flops)
    elif "selfplay_act" in acts:
        expected = share * act_full_flops + (1 - share) * act_fast_flops
        programs["selfplay_act"] = program_row(acts["selfplay_act"], expected,
                                               flops_xla_analysed=acts["selfplay_act"].flops)

    # ---- the partition of one iteration (each timing's --statistic)
    wall = typical(iteration)
    sims = full_steps * N_full + fast_steps * N_fast  # simulations per iteration
    act_time = full_steps * act_full.typical + fast_steps * (act_fast.typical if act_fast else 0.0)
    tree_time = full_steps * tree_full.typical + fast_steps * (tree_fast.typical if tree_fast else 0.0)
    rows: list[dict] = []

    def add(part: str, per_call: Measured | float, calls_per_iteration: float, how: str, note: str = ""):
        seconds = per_call.typical if isinstance(per_call, Measured) else per_call
        row = {"part": part, "how": how, "calls_per_iteration": calls_per_iteration,
               "seconds_per_call": seconds, "seconds_per_iteration": seconds * calls_per_iteration}
        if isinstance(per_call, Measured):
            row["seconds_per_call_stats"] = per_call.seconds
            note = note or per_call.note
            if per_call.flops:
                row["flops_per_call"] = per_call.flops
                row["gflops_per_s"] = per_call.flops / seconds / 1e9 if seconds > 0 else 0.0
                row["efficiency"] = row["gflops_per_s"] / matmul if matmul else 0.0
        if note:
            row["note"] = note
        rows.append(row)

    net = parts_measured["network_initial"]
    hist = parts_measured["history_stacking"]
    add("network_root", net, T, "measured")
    if alphazero:
        add("network_in_search", net, sims, "measured", "initial inference on each expanded node's history "
            "(the root's program, per simulation)")
        add("history_stacking", hist, T + sims, "measured", "at the root and at each expanded node")
        add("env_step_in_search", parts_measured["env_step_in_search"], sims, "measured")
    else:
        add("network_in_search", parts_measured["network_recurrent"], sims, "measured")
        add("history_stacking", hist, T, "measured", "at the root")
    tree_note = f"stub-model searches: {full_steps:g} x {N_full} simulations" + (
        f" + {fast_steps:g} x {N_fast}" if planner_fast else "")
    add("tree_ops", tree_time, 1, "measured", tree_note + " (the stub's tree may differ in depth)")
    inside_act = sum(r["seconds_per_iteration"] for r in rows)
    add("search_rest", act_time - inside_act, 1, "difference",
        "the act programs' time minus the parts above: the model's masks and wheres, the capped act's "
        "branch, statistics, and what fusing the parts gains (negative) or loses")
    if anakin:
        add("env_step_selfplay", parts_measured["env_step_selfplay"], T, "measured")
        segment_parts = act_time + T * parts_measured["env_step_selfplay"].typical
        add("segment_rest", segment.typical - segment_parts, 1, "difference",
            "the segment minus its acts and env steps: exploration, step records, the scan")
        add("host_python", wall - segment.typical, 1, "difference",
            "the iteration minus the segment: the parameters' upload, copying the records back, cutting "
            "trajectories, Python")
    else:
        add("env_step_host", host_env, T, "measured", f"{config.game}'s VectorEnv step, B={B}, alone")
        add("host_python", wall - act_time - T * host_env.typical, 1, "difference",
            "the iteration minus the acts and the env steps: the parameters' upload on every act call, "
            "copying results back, exploration, recording episodes, Python")
    for row in rows:
        row["share"] = row["seconds_per_iteration"] / wall if wall > 0 else 0.0
    measured_share = sum(r["share"] for r in rows if r["how"] == "measured")

    per_simulation = (net.typical + hist.typical + parts_measured["env_step_in_search"].typical if alphazero
                      else parts_measured["network_recurrent"].typical)
    checks = {
        "search_model_by_difference": {
            "seconds": act_full.typical - tree_full.typical,
            "measured_alone": net.typical + hist.typical + N_full * per_simulation,
            "note": "act at N simulations minus the stub search (the model's work inside the search, by "
                    "difference), against the root's inference and history plus N x a simulation's "
                    + ("network, history and env step" if alphazero else "recurrent inference")
                    + ", each measured alone",
        },
        "measured_share": measured_share,
    }
    if anakin:
        checks["segment_vs_steps"] = {
            "seconds": segment.typical, "steps": segment_parts,
            "note": "the segment against its acts (full and fast, as its coins fell) and env steps measured alone"}

    learner_report = time_learner(learner, compiler, repeats, matmul, program_row)
    programs["train_step"] = learner_report.pop("train_step_program")
    return {
        "game": config.game, "agent": config.agent, "path": path,
        "sizes": {"num_envs": B, "num_simulations": N_full, "fast_simulations": N_fast or None,
                  "full_search_share": share, "rollout_steps": T, "batch_size": config.train.batch_size,
                  "unroll_steps": config.targets.num_unroll_steps,
                  "updates_per_iteration": config.train.updates_per_iteration,
                  "history_length": config.targets.history_length, "obs_shape": list(spec.obs_shape),
                  "num_actions": A, "network": dataclasses.asdict(config.network)},
        "compile_seconds": compiler.seconds,
        "flops_search_loop_body_counted_once": counted_once,
        "programs": programs,
        "iteration": {"seconds": iteration, "env_steps": T * B, "full_search_steps": full_steps,
                      "fast_search_steps": fast_steps, "simulations": sims,
                      "coins": "as the segment's coins fell" if anakin else "expected (share x T)"},
        "parts": rows,
        "checks": checks,
        "learner": learner_report,
        "conv3x3": time_conv(conv, compiler, repeats, matmul),
        **config_record(config_to_dict(config)),
    }


def _stub_model(case: _Case):
    """The case's search model with the real one's embedding and constant outputs: no network, no env
    step (MuZero's keeps its absorbing dummy action, as the act's does)."""
    import mctx

    from moozi.core.alphazero import PerfectModelEmbedding
    from moozi.core.planner import SearchModel, with_absorbing_dummy

    num_actions, discount, network = case.A, case.discount, case.network

    def outputs(batch: int, anchor):
        zero = jnp.zeros((batch,), jnp.float32) + anchor  # depends on the input (nothing folds away)
        return zero, jnp.zeros((batch, num_actions), jnp.float32) + anchor

    if case.alphazero:
        def root(params, rng, root_input):
            batch = root_input.is_last.shape[0]
            value, logits = outputs(batch, jnp.mean(root_input.history.frames) * 0.0)
            embedding = PerfectModelEmbedding(root_input.env_state, root_input.history, root_input.is_last,
                                              root_input.to_play)
            return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=embedding)
    else:
        def root(params, rng, stacked_obs):
            batch = stacked_obs.shape[0]
            anchor = jnp.mean(stacked_obs) * 0.0
            value, logits = outputs(batch, anchor)
            hidden = jnp.zeros((batch, *network.hidden_state_shape), jnp.float32) + anchor
            return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=hidden)

    def recurrent(params, rng, action, embedding):
        value, logits = outputs(action.shape[0], jnp.float32(0.0) * action[0])
        out = mctx.RecurrentFnOutput(reward=value, discount=jnp.full_like(value, discount), prior_logits=logits,
                                     value=value)
        return out, embedding

    stub = SearchModel(root=root, recurrent=recurrent)
    return stub if case.alphazero else with_absorbing_dummy(stub)


def _time_host_env(config, num_envs: int, steps: int, repeats: int) -> Measured:
    """Seconds per step of the config's host VectorEnv (B envs, random legal moves), on an env of its own."""
    from moozi.builders import make_vector_env

    env = make_vector_env(config, num_envs, seed=12345, num_processes=config.env.num_processes)
    rng = np.random.default_rng(0)
    try:
        step = env.reset()
        for _ in range(steps):  # warm-up
            step = env.step(_random_legal(step.legal_actions, int(rng.integers(1 << 30))), step.is_last)
        per_step = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(steps):
                action = _random_legal(step.legal_actions, int(rng.integers(1 << 30)))
                step = env.step(action, step.is_last)
            per_step.append((time.perf_counter() - start) / steps)
    finally:
        env.close()
    return Measured(_stats(per_step), 0.0, "host env step (random legal moves drawn inside the timing)")


# ---------------------------------------------------------------- learner


def prepare_learner(config, optimizer, compiler: Compiler) -> dict:
    """A replay buffer of synthetic episodes and the train step lowered on one of its batches."""
    from bench.selfplay import _synthetic_episode
    from moozi.builders import env_spec
    from moozi.training.roles.replay_buffer import ReplayRole

    spec = env_spec(config)
    batch_size = config.train.batch_size
    steps_per_iteration = config.train.rollout_steps * config.env.num_envs
    replay = ReplayRole(config)
    rng = np.random.default_rng(config.seed)
    length = min(spec.max_episode_steps or 50, 50)
    while len(replay.buffer) < max(2 * batch_size, steps_per_iteration):
        replay.buffer.add(_synthetic_episode(spec, length, rng))
    batch = jax.device_put(replay.sample_batches(1, batch_size)[0][0])  # also compiles the target assembly
    args = (optimizer.state, batch, jax.random.key(0), np.float32(0.0))
    compiler.add("train_step", optimizer._train_step.lower(*args))
    return {"config": config, "spec": spec, "optimizer": optimizer, "replay": replay, "rng": rng,
            "length": length, "steps_per_iteration": steps_per_iteration, "train_args": args}


def time_learner(ctx: dict, compiler: Compiler, repeats: int, matmul: float, program_row) -> dict:
    """The learner's side of one iteration at the preset's batch: train step, update, sample, priorities, insert."""
    from bench.selfplay import _synthetic_episode

    config, optimizer, replay, rng = ctx["config"], ctx["optimizer"], ctx["replay"], ctx["rng"]
    spec, length, steps_per_iteration = ctx["spec"], ctx["length"], ctx["steps_per_iteration"]
    U, batch_size = config.train.updates_per_iteration, config.train.batch_size
    compiled, args = compiler["train_step"], ctx["train_args"]
    train = time_program(compiled, args, repeats, f"one update at batch {batch_size}")
    optimizer._train_step = compiled  # the role's update runs the very program analysed
    state = optimizer.state

    sample, update, priorities, insert = [], [], [], []
    episodes_per_insert = max(1, -(-steps_per_iteration // length))
    for _ in range(repeats + 1):  # the first round warms up
        start = time.perf_counter()
        batches = replay.sample_batches(U, batch_size)
        sample.append(time.perf_counter() - start)
        optimizer.state = state  # every repeat updates the initial parameters (no drift, the same work)
        start = time.perf_counter()
        result = optimizer.update(batches, 0.0)
        update.append(time.perf_counter() - start)
        start = time.perf_counter()
        replay.update_priorities(result)
        priorities.append(time.perf_counter() - start)
        trajectories = [_synthetic_episode(spec, length, rng) for _ in range(episodes_per_insert)]
        start = time.perf_counter()
        replay.buffer.add_many(trajectories)
        insert.append(time.perf_counter() - start)
    optimizer.state = state
    sample, update, priorities, insert = (_stats(s[1:]) for s in (sample, update, priorities, insert))
    _log("timed the learner's iteration")
    parts = [
        {"part": "train_steps", "how": "measured", "calls_per_iteration": U, "seconds_per_call": train.typical,
         "note": "the compiled train step alone"},
        {"part": "update_host", "how": "difference", "calls_per_iteration": 1,
         "seconds_per_call": typical(update) - U * train.typical,
         "note": "the role's update minus its train steps: finiteness checks, metrics copied back"},
        {"part": "replay_sample", "how": "measured", "calls_per_iteration": 1, "seconds_per_call": typical(sample),
         "note": f"{U} batches: numpy gather, the jitted target assembly, symmetry augmentation"},
        {"part": "priority_update", "how": "measured", "calls_per_iteration": 1,
         "seconds_per_call": typical(priorities), "note": "host numpy and the sum tree"},
        {"part": "replay_insert", "how": "measured", "calls_per_iteration": 1, "seconds_per_call": typical(insert),
         "note": f"{episodes_per_insert} synthetic episodes of {length} steps (one iteration's ~{steps_per_iteration}"
                 " steps): host numpy, not a compiled program"},
    ]
    total = sum(p["seconds_per_call"] * p["calls_per_iteration"] for p in parts)
    for p in parts:
        p["seconds_per_iteration"] = p["seconds_per_call"] * p["calls_per_iteration"]
        p["share"] = p["seconds_per_iteration"] / total if total > 0 else 0.0
    return {
        "train_step_program": program_row(train),
        "seconds_per_iteration": total,
        "update_seconds": update, "sample_seconds": sample, "priority_seconds": priorities, "insert_seconds": insert,
        "parts": parts,
    }


# ---------------------------------------------------------------- the 3x3 convolution


CONV_FORMS = ("lax_conv", "im2col")
CONV_LOOP_CALLS = 8


def _conv_fns():
    from bench.conv_forms import im2col_conv, lax_conv

    def forward(conv):
        return lambda w, x: conv(x, w)

    def forward_backward(conv):
        def f(w, x, g):
            _, vjp = jax.vjp(lambda x_, w_: conv(x_, w_), x, w)
            return vjp(g)  # (dx, dw)
        return f

    forms = {"lax_conv": lax_conv, "im2col": im2col_conv}
    return forms, forward, forward_backward


def prepare_conv(config, network, search_batch: int, compiler: Compiler) -> dict | None:
    """One of the trunk's 3x3 convolutions (channels -> channels) in both forms, lowered: forward at the
    search's batch, forward + backward at the learner's, and single calls for comparing their outputs."""
    if config.network.kind != "resnet":
        return None
    height, width, channels = network.hidden_state_shape
    dtype = jnp.dtype(config.network.dtype)
    rng = np.random.default_rng(7)  # numpy: no jax.random program to compile per shape

    def normal(*shape, scale=1.0):
        return jnp.asarray((rng.standard_normal(shape) * scale).astype(np.float32)).astype(dtype)

    forms, forward, forward_backward = _conv_fns()
    w = normal(3, 3, channels, channels, scale=1 / np.sqrt(9 * channels))
    ctx = {"w": w, "height": height, "width": width, "channels": channels, "dtype": dtype, "runs": {}}
    for label, batch, make, passes in (("search_forward", search_batch, forward, 1),
                                       ("learner_forward_backward", config.train.batch_size, forward_backward, 3)):
        x, g = normal(batch, height, width, channels), normal(batch, height, width, channels)
        data = (x,) if passes == 1 else (x, g)
        parts = {form: lower_looped(compiler, f"conv_{label}_{form}", make(conv), w, data, CONV_LOOP_CALLS, "")
                 for form, conv in forms.items()}
        ctx["runs"][label] = (batch, passes, data, parts)
    x, g = normal(search_batch, height, width, channels), normal(search_batch, height, width, channels)
    ctx["check"] = (x, g)
    for form, conv in forms.items():
        compiler.lower(f"conv_check_{form}", forward_backward(conv), w, x, g)
        compiler.lower(f"conv_out_{form}", forward(conv), w, x)
    return ctx


def time_conv(ctx: dict | None, compiler: Compiler, repeats: int, matmul: float) -> dict | None:
    """Times, FLOPs and agreement of the two forms (see prepare_conv)."""
    from bench.conv_forms import conv_flops

    if ctx is None:
        return None
    height, width, channels, w = ctx["height"], ctx["width"], ctx["channels"], ctx["w"]
    out: dict = {"height": height, "width": width, "channels_in": channels, "channels_out": channels,
                 "kernel": [3, 3], "dtype": str(ctx["dtype"]), "layout": "NHWC input, HWIO weights",
                 "loop_calls": CONV_LOOP_CALLS}
    for label, (batch, passes, data, parts) in ctx["runs"].items():
        analytic = passes * conv_flops(batch, height, width, channels, channels)
        rows: dict = {"batch": batch}
        for form, part in parts.items():
            m = time_looped(compiler, f"conv_{label}_{form}", part, w, data, repeats)
            gflops = analytic / m.typical / 1e9 if m.typical > 0 else 0.0
            rows[form] = {"seconds": m.seconds, "flops_analytic": analytic, "flops_xla": m.flops,
                          "gflops_per_s": gflops, "efficiency": gflops / matmul if matmul else 0.0}
        rows["im2col_over_lax_time"] = typical(rows["im2col"]["seconds"]) / typical(rows["lax_conv"]["seconds"])
        out[label] = rows

    x, g = ctx["check"]
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    ref, mine = compiler["conv_out_lax_conv"](w, x), compiler["conv_out_im2col"](w, x)
    out["max_abs_error_forward"] = float(jnp.max(jnp.abs(f32(ref) - f32(mine))))
    grads_ref, grads_mine = compiler["conv_check_lax_conv"](w, x, g), compiler["conv_check_im2col"](w, x, g)
    out["max_abs_error_grad"] = float(max(jnp.max(jnp.abs(f32(a) - f32(b))) for a, b in zip(grads_ref, grads_mine)))
    out["output_scale"] = float(jnp.max(jnp.abs(f32(ref))))
    out["grad_scale"] = float(max(jnp.max(jnp.abs(f32(a))) for a in grads_ref))
    _log("timed the 3x3 convolution's two forms")
    return out


# ---------------------------------------------------------------- table and main


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:10.3f}"


def table(report: dict) -> str:
    m = report["machine"]
    lines = [f"device {m['device']}; matmul {MATMUL_SIZE}^2: {m['matmul_gflops_at_start']} GFLOP/s at start, "
             f"{m['matmul_gflops_at_end']} at end (efficiency divides by {report['matmul_gflops']}); parts, "
             f"shares and GFLOP/s from each timing's {report['statistic']}"]
    for name, case in report["cases"].items():
        s = case["sizes"]
        lines.append(f"\n== {name}: {case['agent']} on {case['game']} ({case['path']} path), B={s['num_envs']}, "
                     f"{s['num_simulations']} simulations"
                     + (f" ({s['fast_simulations']} fast, share {s['full_search_share']})" if s["fast_simulations"] else "")
                     + f", T={s['rollout_steps']}, learner batch {s['batch_size']} K={s['unroll_steps']}")
        lines.append(f"{'compiled program':<22}{'median ms':>10}{'min ms':>10}{'GFLOP/call':>12}{'GFLOP/s':>10}{'eff.':>8}")
        for prog, row in case["programs"].items():
            lines.append(f"{prog:<22}{_ms(row['seconds']['median'])}{_ms(row['seconds']['min'])}"
                         f"{row['flops_per_call'] / 1e9:12.4f}{row['gflops_per_s']:10.2f}{row['efficiency']:8.3f}")
        it = case["iteration"]
        lines.append(f"self-play iteration: median {it['seconds']['median'] * 1e3:.2f} ms (min "
                     f"{it['seconds']['min'] * 1e3:.2f}) for {it['env_steps']} env steps; {it['full_search_steps']:g} full "
                     f"+ {it['fast_search_steps']:g} fast searches ({it['coins']}), {it['simulations']:g} simulations")
        lines.append(f"{'part':<22}{'how':>11}{'calls/it':>10}{'ms/call':>10}{'ms/iter':>10}{'share':>8}{'GFLOP/s':>9}"
                     f"{'harness ms/call':>17}")
        for row in case["parts"]:
            gf = f"{row['gflops_per_s']:9.2f}" if "gflops_per_s" in row else f"{'':>9}"
            harness = row.get("seconds_per_call_stats", {}).get("harness")
            harness = f"{typical(harness) * 1e3:17.3f}" if harness else ""
            lines.append(f"{row['part']:<22}{row['how']:>11}{row['calls_per_iteration']:10.4g}"
                         f"{_ms(row['seconds_per_call'])}{_ms(row['seconds_per_iteration'])}{row['share']:8.3f}{gf}"
                         + harness)
        c = case["checks"]
        lines.append(f"measured alone: {c['measured_share']:.3f} of the iteration; the rest is by difference")
        sm = c["search_model_by_difference"]
        lines.append(f"check: real search - stub search {sm['seconds'] * 1e3:.3f} ms vs its model calls alone "
                     f"{sm['measured_alone'] * 1e3:.3f} ms")
        if "segment_vs_steps" in c:
            sv = c["segment_vs_steps"]
            lines.append(f"check: segment {sv['seconds'] * 1e3:.3f} ms vs its acts and env steps alone {sv['steps'] * 1e3:.3f} ms")
        lr = case["learner"]
        lines.append(f"learner, one iteration: {lr['seconds_per_iteration'] * 1e3:.2f} ms")
        for row in lr["parts"]:
            lines.append(f"  {row['part']:<20}{row['how']:>11}{row['calls_per_iteration']:10.4g}"
                         f"{_ms(row['seconds_per_call'])}{_ms(row['seconds_per_iteration'])}{row['share']:8.3f}")
        conv = case["conv3x3"]
        if conv:
            lines.append(f"3x3 conv {conv['height']}x{conv['width']}, {conv['channels_in']}->{conv['channels_out']} "
                         f"channels ({conv['dtype']}); |im2col - lax| forward {conv['max_abs_error_forward']:.2e}, "
                         f"gradient {conv['max_abs_error_grad']:.2e}")
            for label in ("search_forward", "learner_forward_backward"):
                rows = conv[label]
                lines.append(f"  {label} (B={rows['batch']}): " + "; ".join(
                    f"{form} {typical(rows[form]['seconds']) * 1e3:.4f} ms = {rows[form]['gflops_per_s']:.2f} GFLOP/s "
                    f"({rows[form]['efficiency']:.3f} of matmul)" for form in ("lax_conv", "im2col"))
                    + f"; im2col/lax time {rows['im2col_over_lax_time']:.3f}")
    return "\n".join(lines)


def _rounded(value):
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (4 channels, B=4, 4 simulations): a check")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls after the warm-up (5; tiny 3)")
    parser.add_argument("--warmup-iterations", type=int, default=None,
                        help="self-play iterations before the timed ones (2; tiny 1): compiling, games under way")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for every case (repeatable), e.g. network.dtype=bfloat16")
    parser.add_argument("--statistic", choices=("median", "min"), default="median",
                        help="the timing statistic the parts, shares and GFLOP/s use (min on a busy machine)")
    parser.add_argument("--out", default=None, help="also write the JSON object here (atomically)")
    args = parser.parse_args(argv)
    global STATISTIC
    STATISTIC = args.statistic
    out = pathlib.Path(args.out).resolve() if args.out else None
    if out is not None and RESULTS_DIR.resolve() in out.parents:
        raise SystemExit("selfplay_profile: not into bench/results/ (results_page.py has no adapter for this "
                         "file); write it elsewhere")
    cases = [c for c in args.cases.split(",") if c]
    sets = _parse_sets(args.set)
    repeats = args.repeats or (3 if args.tiny else 5)
    warmup = args.warmup_iterations if args.warmup_iterations is not None else (1 if args.tiny else 2)
    configs = {name: case_config(name, args.tiny, sets) for name in cases}  # a bad case or --set fails first

    from bench.provenance import provenance

    device = jax.devices()[0]
    report = provenance(device=f"{device.platform}:{device.device_kind}")
    if argv is not None:  # called in-process (tests): the command this call stands for
        report["command"] = " ".join([sys.executable, str(pathlib.Path(__file__).relative_to(ROOT)), *argv])
    report.update({"benchmark": "selfplay_profile", "tiny": args.tiny, "repeats": repeats, "statistic": STATISTIC,
                   "warmup_iterations": warmup, "sets": sets,
                   "load_average_1min_before": os.getloadavg()[0]})
    start_rate = report["machine"]["matmul_gflops_at_start"]
    report["cases"] = {}
    for name, config in configs.items():
        report["cases"][name] = profile_case(name, config, repeats, warmup, start_rate)
    end_rate = matmul_gflops()
    report["machine"]["matmul_gflops_at_end"] = end_rate
    report["matmul_gflops"] = max(start_rate, end_rate)
    if end_rate > start_rate:  # efficiency against the better of the two rates
        for case in report["cases"].values():
            _rescale_efficiency(case, start_rate / end_rate)
    report["load_average_1min_after"] = os.getloadavg()[0]
    report = _rounded(report)
    print(table(report), file=sys.stderr)
    if out is not None:
        write_result(out, report, indent=None)
    print(json.dumps(report))
    return report


def _rescale_efficiency(tree, factor: float) -> None:
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key == "efficiency" and isinstance(value, float):
                tree[key] = value * factor
            else:
                _rescale_efficiency(value, factor)
    elif isinstance(tree, list):
        for value in tree:
            _rescale_efficiency(value, factor)


if __name__ == "__main__":
    main()
