"""Which part of a trained backgammon agent plays well: its search, its prior, its learned afterstate
values, or its value of the real next position.

    python bench/backgammon_probe.py RUN [--checkpoint PATH] [--games 60] [--simulations N]
        [--ways search,search_visits,prior,afterstate,next_position]

Each way plays `--games` games (both seats, in one batch, moozi/evaluation/vector_matches.py) against
a random mover and against the greedy pip-count bot, and prints one JSON line per match:

- search: the agent as `load_agent` plays it (its search, greedy; `--simulations` as `load_agent`'s);
- search_visits: the same search, playing its most visited move (with `planner.policy_target=
  completed_q` the greedy agent plays the target's best move instead, moozi/core/planner.py);
- prior: the argmax of the representation's policy at the root (no search);
- afterstate: one ply through the learned model: the argmax over legal moves of the afterstate
  value ψ(φ(h(o), a)) (no search);
- next_position: one ply through the real game: each legal move played in pgx, the next position
  valued by h and f (negated where the turn passed; a win scores the game's points).

A weak search beside a strong next_position says the value is learned and the model or the search
is not (docs/stochastic.md, "Backgammon").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from moozi.builders import build_network, make_vector_env
from moozi.core.acting import ActingOutput
from moozi.core.history import history_input, init_history, push_history
from moozi.evaluation.intervals import wilson_interval
from moozi.evaluation.matches import batch_opponent
from moozi.evaluation.vector_matches import play_batch
from moozi.play import load_agent
from moozi.play.trained_agent import Agent

WAYS = ("search", "search_visits", "prior", "afterstate", "next_position")


def _ways(agent) -> dict:
    import pgx

    spec = agent.spec
    network = build_network(agent.config, spec)
    num_actions = spec.num_actions
    library_env = pgx.make("backgammon")

    def stacked(obs, last_action, is_first):
        history = push_history(init_history(obs.shape[0], 1, spec.obs_shape), obs, is_first, last_action)
        return history_input(history, num_actions)

    def answer(history, action, value):
        return history, ActingOutput(action.astype(jnp.int32), value, None, None, None)

    @jax.jit
    def prior(variables, history, step, last_action, env_state, key):
        out = network.initial_inference(variables, stacked(step.obs, last_action, step.is_first))
        return answer(history, jnp.argmax(jnp.where(step.legal_actions, out.policy_logits, -jnp.inf), -1), out.value)

    @jax.jit
    def afterstate(variables, history, step, last_action, env_state, key):
        root = network.initial_inference(variables, stacked(step.obs, last_action, step.is_first))
        batch = step.obs.shape[0]
        q = jax.vmap(lambda a: network.afterstate_inference(variables, root.hidden_state,
                                                             jnp.full((batch,), a, jnp.int32)).value)
        values = q(jnp.arange(num_actions)).T  # [B, A]
        return answer(history, jnp.argmax(jnp.where(step.legal_actions, values, -jnp.inf), -1), root.value)

    @jax.jit
    def next_position(variables, history, step, last_action, env_state, key):
        library_actions = jnp.arange(num_actions - 1, dtype=jnp.int32)

        def choose(state, key):
            mover = state.current_player
            children = jax.vmap(lambda a: library_env.step(state, a, key))(library_actions)
            obs = children.observation.astype(jnp.float32).reshape(-1, *spec.obs_shape)
            value = network.initial_inference(variables, stacked(obs, library_actions + 1,
                                                                 jnp.zeros(num_actions - 1, bool))).value
            value = jnp.where(children.current_player == mover, value, -value)
            value = jnp.where(children.terminated, children.rewards[:, mover], value)
            return jnp.argmax(jnp.where(state.legal_action_mask, value, -jnp.inf)) + 1  # the bridge's numbering

        actions = jax.vmap(choose)(env_state, jax.random.split(key, step.obs.shape[0]))
        return answer(history, actions, jnp.zeros(actions.shape))

    by_visits = dataclasses.replace(agent.config, planner=dataclasses.replace(agent.config.planner, policy_target="visits"))
    search_visits = Agent(by_visits, agent.variables, simulations=agent.simulations).batched_act
    return {"search": agent.batched_act, "search_visits": search_visits, "prior": prior, "afterstate": afterstate,
            "next_position": next_position}


def probe(agent, games: int, ways=WAYS, seed: int = 7, max_steps: int = 5000) -> list[dict]:
    """One row per (way, opponent): the agent's wins over `games` games, game i in seat i % 2 (a game
    still going after `max_steps` steps counts as unfinished, not won)."""
    if agent.config.targets.history_length != 1:
        raise ValueError("the probe values single positions: a run with targets.history_length=1 (the preset's)")
    acts, rows = _ways(agent), []
    for way in ways:
        for opponent in ("random", "pipcount"):
            started = time.time()
            env = make_vector_env(agent.config, games, seed)
            try:
                played = play_batch(acts[way], agent.variables, env, history_length=agent.config.targets.history_length,
                                    obs_shape=agent.spec.obs_shape, is_two_player=True, seed=seed, max_steps=max_steps,
                                    opponent=batch_opponent(opponent, "pgx:backgammon", seed + 1),
                                    needs_env_state=True)
            finally:
                env.close()
            wins = int(np.sum(played.outcome > 0))
            low, high = wilson_interval(wins, games)
            rows.append({"way": way, "opponent": opponent, "games": games, "wins": wins,
                         "wins_by_seat": [int(np.sum(played.outcome[played.agent_seat == s] > 0)) for s in (0, 1)],
                         "finished": int(np.sum(played.finished)),
                         "win_rate_ci95": [round(low, 3), round(high, 3)], "seconds": round(time.time() - started, 1)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--games", type=int, default=60)
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--simulations", type=int, default=None, help="the searches' simulations per move")
    args = parser.parse_args(argv)
    ways = [w for w in args.ways.split(",") if w]
    unknown = [w for w in ways if w not in WAYS]
    if unknown:
        parser.error(f"--ways: unknown {', '.join(unknown)}; known: {', '.join(WAYS)}")
    agent = load_agent(args.run, checkpoint=args.checkpoint, simulations=args.simulations)
    if agent.spec.name != "pgx:backgammon":
        parser.error(f"{args.run} is a run of {agent.spec.name}, not pgx:backgammon")
    return probe(agent, args.games, ways, args.seed)


if __name__ == "__main__":
    main(sys.argv[1:])
