"""Per-game presets: only the settings that differ from the base config, each with what it does.

Where a setting was chosen by measurement, its comment names where the measurement lives (a page of
docs/ or docs/experiments/, a file of bench/results/); the comments here do not repeat the figures."""

from __future__ import annotations

from typing import Any

# Small presets over the base config: only what differs per game, never a whole copied config.
# The board games' learning settings: Connect Four's, which go9 takes too (docs/board_games.md, docs/go.md;
# measured: docs/experiments/2026-11-23-connect-four-learned-model-fixes.md).
_BOARD_GAME_LEARNING = {
    # Outcomes one-hot on the identity categories -1, 0, 1.
    "network.support.min_value": -1,
    "network.support.max_value": 1,
    "network.support.transform": "identity",
    # Layer norm: acting and training compute the same function (no running moments).
    "network.normalization": "layer",
    "network.representation_blocks": 3,
    "network.dynamics_blocks": 1,
    "loss.value_coef": 1.0,
    "targets.discount": 1.0,
    "env.num_envs": 32,
    "train.batch_size": 128,
    "replay.capacity": 200_000,
    "replay.min_fill": 2_000,
    # Uniform, as AlphaZero samples: with Monte-Carlo targets |v - z| mostly measures how
    # unpredictable a position still is.
    "replay.sampling": "uniform",
}
PRESET_OVERRIDES: dict[str, dict[str, Any]] = {
    "tic_tac_toe": {
        # A small MLP: the board is nine cells.
        "network.kind": "mlp",
        "network.mlp_hidden_sizes": (64, 64),
        # Outcomes lie in [-1, 1]: value categories -1..1 (wider ones decode stray mass far outside).
        "network.support.min_value": -1,
        "network.support.max_value": 1,
        # Gumbel MuZero: a good policy target from few simulations; every move considered at the root.
        "planner.search_policy": "gumbel_muzero",
        "planner.num_simulations": 16,
        "planner.max_num_considered_actions": 9,
        # Acting explores with 3x the Gumbel noise (the policy target is unaffected; tests and eval use 0).
        "planner.gumbel_scale": 3.0,
        "planner.discount": 1.0,
        "planner.dirichlet_alpha": 0.5,
        "loss.value_coef": 1.0,  # values drive the search in board games: full weight
        "targets.td_steps": 9,  # the longest game: a Monte-Carlo return
        "targets.discount": 1.0,
        "targets.num_unroll_steps": 3,
        "env.num_envs": 32,
        "train.batch_size": 128,
        "train.rollout_steps": 4,
        # The base's 4 updates per 128 new steps, at a high rate: the tiny network's loop is bound by
        # Python dispatch, so learning more from each step buys time (docs/experiments/2026-11-24-presets.md).
        "optimizer.learning_rate": 3e-3,
        "train.test_every_updates": 1000,
        "train.test_episodes": 50,
        "replay.capacity": 20_000,
        "replay.min_fill": 500,
    },
    "connect_four": {
        # Gumbel MuZero with 16 simulations and two sampled targets per collected step: on a CPU the
        # search is the expensive part (measured: docs/experiments/2026-11-23-connect-four-learned-model-fixes.md).
        "planner.search_policy": "gumbel_muzero",
        "planner.num_simulations": 16,
        # Play searches more than training does (docs/board_games.md, "Search at play time"; measured:
        # docs/experiments/2026-11-27-connect-four-presets.md).
        "planner.play_simulations": 100,
        "train.updates_per_iteration": 8,
        "planner.max_num_considered_actions": 7,
        "planner.discount": 1.0,
        **_BOARD_GAME_LEARNING,
        "targets.td_steps": 42,  # the longest game: a Monte-Carlo return
        # Three unroll steps, not the base's five: MuZero is bound by its learner here and the unroll is
        # most of an update, so a shorter one buys more updates an hour. AlphaZero mode unrolls nothing
        # whatever this says. (Measured: docs/experiments/2026-11-27-connect-four-presets.md;
        # bench/results/ablations/2026-11-29-connect_four-muzero-unroll3-25min-one-core-each-seeds2-3.json.)
        "targets.num_unroll_steps": 3,
    },
    "go9": {
        # AlphaZero mode on pgx's go_9x9: the search plays out passes with the real rules and score,
        # where the learned model learned to pass early (docs/go.md, "Why AlphaZero mode").
        "agent": "alphazero",
        # Connect Four's choices (docs/go.md): Gumbel MuZero, identity categories, layer norm, value
        # weight 1, 3 blocks, uniform replay.
        "planner.search_policy": "gumbel_muzero",
        "planner.num_simulations": 32,
        "planner.play_simulations": 64,
        # Never fill an own single-point eye; never pass first while another stone is left; after the
        # opponent's pass, pass when the area count wins (docs/go.md, "Passing at play time").
        "planner.play_pass_rule": "no_eye_fill",
        "planner.discount": 1.0,
        **_BOARD_GAME_LEARNING,
        "targets.td_steps": 200,
        # Keeps the learner busy while the search plays (docs/go.md).
        "train.updates_per_iteration": 16,
        "train.test_every_updates": 500,
    },
    "cartpole": {
        # The base's 50 simulations are muzero-general's cartpole setting.
        "network.kind": "mlp",
        "replay.capacity": 50_000,
        "replay.min_fill": 1_000,
    },
    # Chance games (docs/stochastic.md): Stochastic MuZero, which plans over learned chance outcomes;
    # stochastic.num_chance_outcomes keeps its 32 codes (2048's new tile: 2 or 4 on one of 16 cells).
    "2048": {
        "agent": "stochastic_muzero",
        # An MLP over the flattened 4x4 board, as for MinAtar: XLA's small convolutions are slow on a CPU.
        "network.kind": "mlp",
        "network.mlp_hidden_sizes": (256, 256),
        "network.mlp_hidden_state_size": 128,
        # Rewards are the merged tiles (up to thousands per step): categories -100..100 after the squashing
        # cover values up to ~10,000. Symmetric although returns are never negative, so that an untrained
        # head (near-uniform logits) predicts ~0 instead of the support's middle (0..100: ~2,500), which
        # the first value targets would bootstrap from.
        "network.support.min_value": -100,
        "network.support.max_value": 100,
        # PUCT only (chance nodes); a simulation costs two network steps (a move and a chance outcome).
        "planner.num_simulations": 25,
        "env.num_envs": 32,
        "train.batch_size": 128,
        "replay.capacity": 200_000,
        "replay.min_fill": 2_000,
        "train.test_every_updates": 1_000,
        "train.test_episodes": 8,  # a game lasts hundreds of moves
        # The board's 8 symmetries (moozi.core.symmetry) off: early play gains most from one fixed
        # preference (slide towards a corner), which averaging over the turned and mirrored boards takes
        # away from an MLP that must then learn it board by board (measured:
        # docs/experiments/2026-11-27-2048-stochastic-muzero.md, "Symmetry augmentation").
        "replay.symmetry_augmentation": False,
    },
    "backgammon": {
        "agent": "stochastic_muzero",
        "network.kind": "mlp",  # pgx's observation is a vector of 34
        # The dynamics sees each checker move's source, die and target (docs/stochastic.md; measured:
        # docs/experiments/2026-11-28-backgammon-stochastic-muzero.md).
        "network.mlp_action_features": True,
        # Outcomes: +-1 a single game, +-2 a gammon, +-3 a backgammon.
        "network.support.min_value": -3,
        "network.support.max_value": 3,
        "network.support.transform": "identity",
        "network.normalization": "layer",
        "loss.value_coef": 1.0,
        "planner.num_simulations": 32,
        # The completed-Q policy target: it moves the prior towards the moves the search values, where
        # the visit counts of 32 PUCT simulations over 5-20 legal checker moves mostly repeat the prior
        # (docs/stochastic.md; measured: docs/experiments/2026-11-28-backgammon-stochastic-muzero.md).
        "planner.policy_target": "completed_q",
        "planner.discount": 1.0,
        "targets.discount": 1.0,
        # A Monte-Carlo return; each step's sign comes from who moves next (a turn is one step per die;
        # docs/stochastic.md, "Turns that repeat").
        "targets.td_steps": 500,
        "env.num_envs": 32,
        "train.batch_size": 128,
        "replay.capacity": 200_000,
        "replay.min_fill": 2_000,
        "replay.sampling": "uniform",
        "train.test_every_updates": 500,
    },
}
# The MinAtar preset's settings that do not depend on the game; the Atari preset takes them too. What each
# is for: docs/training.md, "MinAtar: the network, and what an hour buys".
_GAME_INDEPENDENT_LEARNING = {
    # A floor of 0.1 reward under the Q range Gumbel's policy target rescales by: mctx's 1e-8 turns any
    # gap into 5-7 logits where rewards are small or rare, and the targets go one-hot.
    "planner.min_value_range": 0.1,
    # The prior's guards: full value weight, an entropy bonus, and a floor on the prior's entropy at a
    # tenth of its most; they hold the prior's entropy up where the policy target would collapse it
    # (measured: docs/experiments/2026-11-27-one-minatar-preset.md, candidates v4 and v7).
    "loss.value_coef": 1.0,
    "loss.entropy_coef": 0.1,
    "loss.entropy_floor": 0.1,
    # The rate held for the first half of the run's planned length (--max-minutes / --max-env-steps),
    # then a cosine to a quarter: the same on any machine; without either limit it stays at its peak.
    "optimizer.schedule": "cosine",
    "optimizer.decay_over": "run",
    "optimizer.decay_start": 0.5,
    "optimizer.final_learning_rate_fraction": 0.25,
    # AdamW's decoupled decay of the kernels in place of the loss's L2 term: behind batch norm L2 only
    # shrinks the kernels and, through Adam, grows every later step; the decay slows with the schedule
    # (docs/training.md; measured: docs/experiments/2026-11-27-one-minatar-preset.md, candidate v24).
    "loss.l2_coef": 0.0,
    "optimizer.weight_decay": 0.01,
}
# MinAtar: one preset for every game, the game's name its only difference (a game nobody tuned for gets
# what the five measured games got). What each setting is for: docs/training.md, "MinAtar: the network,
# and what an hour buys"; measured: docs/experiments/2026-11-27-one-minatar-preset.md (candidate v24),
# its results: docs/results.md, "MinAtar".
_MINATAR_PRESET = {
    # An MLP over the flattened planes, not the residual network: XLA's small convolutions are slow on a
    # CPU, and the MLP makes many times the experience and updates in an hour (measured: docs/training.md,
    # "MinAtar: the network, and what an hour buys").
    "network.kind": "mlp",
    "network.mlp_hidden_sizes": (256, 256),
    "network.mlp_hidden_state_size": 128,
    # One 3x3 convolution before the MLP (MinAtar's DQN torso): the model sees what stands next to the
    # player at once, where an MLP must learn it cell by cell (measured:
    # docs/experiments/2026-11-25-minatar-asterix-seaquest-freeway.md).
    "network.mlp_conv_channels": 16,
    "train.batch_size": 128,
    # Gumbel MuZero: its policy target improves on the prior even with few simulations, where PUCT's
    # visit counts collapse onto one action (measured: docs/experiments/2026-11-24-presets.md).
    "planner.search_policy": "gumbel_muzero",
    "planner.num_simulations": 16,
    **_GAME_INDEPENDENT_LEARNING,
    # 2 updates per iteration rather than the base's 4: a lower replay ratio, against the prior's late
    # collapse (measured: docs/experiments/2026-11-25-minatar-asterix-seaquest-freeway.md).
    "train.updates_per_iteration": 2,
    "targets.history_length": 2,
    "targets.td_steps": 10,
    "env.num_envs": 32,
    "replay.capacity": 200_000,
    "replay.min_fill": 2_000,
    "train.test_every_updates": 2_000,  # ~20 updates/s: rarer tests keep them a small share of the run
}
for _name in ("breakout", "asterix", "freeway", "seaquest", "space_invaders"):
    PRESET_OVERRIDES[_name] = dict(_MINATAR_PRESET)


# Every `atari:<game>`. The bridge already follows the ALE protocol of Machado et al. (2018): sticky
# actions 0.25, frame skip 4 with a max over the last two frames, 84x84 grey, no life-loss signal
# (docs/envs.md); frames are stacked by the history (4, as DQN and MuZero stack them).
ATARI_PRESET = {
    # MuZero's Atari network at CPU sizes: downsampled to a 6x6 hidden state, one block per stage, so
    # that a search of 16 simulations is affordable on a CPU (docs/envs.md, "Atari"; an hour of it:
    # docs/experiments/2026-11-25-atari-pong-hour.md).
    "network.downsample": True,
    "network.channels": 32,
    "network.representation_blocks": 1,
    "network.prediction_blocks": 1,
    "network.dynamics_blocks": 1,
    "network.head_hidden": 64,
    "targets.history_length": 4,
    "targets.td_steps": 10,
    "planner.search_policy": "gumbel_muzero",  # as for MinAtar: a good policy target from few simulations
    "planner.num_simulations": 16,
    # The MinAtar preset's game-independent settings: the Q range's floor, the prior's guards, the
    # schedule over the run, the decoupled decay in place of L2 (its blocks are batch-normalised too).
    # Carried over by reasoning, not measured on Atari (why: docs/experiments/2026-11-27-one-minatar-preset.md,
    # "What carries over to the Atari preset"). The replay ratio (updates per iteration) stays at the base's.
    **_GAME_INDEPENDENT_LEARNING,
    "env.num_envs": 16,
    "train.batch_size": 64,
    # 8-bit frames take 7,168 bytes per stored step (bench/core.py): 200k steps are 1.3 GiB, which
    # leaves room beside the rest of a run on a 16 GiB machine. MuZero kept 1M on TPU hosts.
    "replay.capacity": 200_000,
    "replay.min_fill": 2_000,
    # Atari episodes run to 27,000 steps: a test of 8 episodes cut at 2,000 steps each, every 1000 updates.
    "train.test_every_updates": 1000,
    "train.test_episodes": 8,
    "train.test_max_steps": 2_000,
    # agent=ppo on Atari frames: cleanrl's ppo_atari settings (Huang et al. 2022), not PPO's MinAtar
    # defaults: one shared Nature-CNN torso, clip 0.1, Adam at 2.5e-4 annealed over 10M steps, 4
    # minibatches.
    "ppo.learning_rate": 2.5e-4,
    "ppo.anneal_learning_rate": True,
    "ppo.clip_epsilon": 0.1,
    "ppo.num_minibatches": 4,
    "ppo.shared_torso": True,
    # agent=impala: the paper's Atari network, one shared torso.
    "impala.shared_torso": True,
}
# Presets for every game of a library, where a game has no preset of its own.
# `minatar:<game>` gets the one MinAtar preset, so that a MinAtar game without a preset name (or one
# typed by its library's name) gets the same settings as the five named ones.
LIBRARY_PRESETS: dict[str, dict[str, Any]] = {"atari": ATARI_PRESET, "minatar": _MINATAR_PRESET}


# What a game's preset changes for one agent only, where that agent was measured apart
# (applied over the game's preset when the run's agent is that one).
AGENT_PRESET_OVERRIDES: dict[str, dict[str, dict[str, Any]]] = {
    "go9": {
        # AlphaZero mode on pgx's go (docs/go.md, "Training signals"): what a finished game says about
        # every point, ownership (a 1x1 convolution) and score heads; Go input features (liberties,
        # atari, ko; computed from pgx's board, so not for agent=muzero's OpenSpiel go); a convolutional
        # policy head; playout cap randomisation, half the moves searched in full and kept as policy
        # targets (the others with planner.fast_simulations' default 8). Measured together, against the
        # preset without them: docs/go.md, "Results"; bench/results/2026-12-06-go9-alphazero-signals-seed0.json
        # and bench/results/2026-12-06-go9-alphazero-seed0-baseline-no-eye-fill.json.
        "alphazero": {
            "env.go_features": True,
            "loss.ownership_coef": 1.5,
            "loss.score_coef": 0.5,
            "network.policy_head": "conv",
            "planner.full_search_share": 0.5,
        },
    },
    "connect_four": {
        # AlphaZero mode: the learning rate decays over the run's planned length to 10%, and self-play
        # explores with twice the Gumbel noise (the policy target does not change). MuZero keeps the
        # constant rate and scale 1, not measured with them. (Measured:
        # docs/experiments/2026-11-27-connect-four-presets.md; its runs:
        # bench/results/2026-11-2[89]-connect_four-alphazero-cosine-gumbel2-seed[012].json.)
        "alphazero": {
            "optimizer.schedule": "cosine",
            "optimizer.decay_over": "run",
            "optimizer.final_learning_rate_fraction": 0.1,
            "planner.gumbel_scale": 2.0,
        },
    },
}


def preset_overrides(game: str, agent: str | None = None) -> dict[str, Any]:
    """The preset for a game name: its own, else its library's (`atari:<game>`), else none; with `agent`,
    what the game's preset changes for that agent on top."""
    if game in PRESET_OVERRIDES:
        preset = dict(PRESET_OVERRIDES[game])
    else:
        library = game.split(":", 1)[0].lower() if ":" in game else None
        preset = dict(LIBRARY_PRESETS.get(library, {}))
    agent = agent if agent is not None else preset.get("agent")
    return {**preset, **AGENT_PRESET_OVERRIDES.get(game, {}).get(str(agent), {})}
