"""Per-game presets: only the settings that differ from the base config, each with its reason."""

from __future__ import annotations

from typing import Any

# Small presets over the base config: only what differs per game, never a whole copied config.
PRESET_OVERRIDES: dict[str, dict[str, Any]] = {
    "tic_tac_toe": {
        "network.kind": "mlp",
        "network.mlp_hidden_sizes": (64, 64),
        # Values and rewards lie in [-1, 1]: phi(±1) = ±0.415, so categories -1..1 cover them;
        # the default -5..5 lets stray mass on far categories decode to values far outside [-1, 1].
        "network.support.min_value": -1,
        "network.support.max_value": 1,
        # Gumbel MuZero: its policy target (softmax of logits + completed Q) is good with few
        # simulations, and 16 simulations make acting ~4x cheaper than 25 PUCT ones on CPU.
        "planner.search_policy": "gumbel_muzero",
        "planner.num_simulations": 16,
        "planner.max_num_considered_actions": 9,  # every legal move is considered at the root
        # Exploration: with scale 1 self-play collapses to a few drawn lines (policy entropy ~0.2)
        # and never sees the positions a random opponent creates. The Gumbel noise only changes
        # the acted move, not the policy target; tests and eval run with scale 0.
        "planner.gumbel_scale": 3.0,
        "planner.discount": 1.0,
        "planner.dirichlet_alpha": 0.5,
        # Full-weight value loss: values drive the search here (0.25 is for replayed Atari data).
        "loss.value_coef": 1.0,
        "targets.history_length": 1,
        "targets.td_steps": 9,
        "targets.discount": 1.0,
        "targets.num_unroll_steps": 3,
        "env.num_envs": 32,
        "train.batch_size": 128,
        "train.rollout_steps": 4,
        # 4 updates of 128 per 128 new steps, at learning rate 3e-3: on this game's tiny network the
        # loop is bound by Python dispatch, so learning more from each step is what buys time. One
        # seed each, one core: no losses to minimax after 2.07 min at (4, 1e-3), 2.63 at (2, 3e-3),
        # 1.58 at (4, 3e-3); the old preset (2, 1e-3, a test every 100 updates) had not got there in 4.1 min.
        "train.updates_per_iteration": 4,
        "optimizer.learning_rate": 3e-3,
        # A test every 1000 updates (~15 s): every 100 cost ~10% of the run's time.
        "train.test_every_updates": 1000,
        "train.test_episodes": 50,  # 20 games give +-0.1 noise on the win rate
        "replay.capacity": 20_000,
        "replay.min_fill": 500,
    },
    "connect_four": {
        # As for tic-tac-toe: Gumbel MuZero's policy target is good with few simulations, which
        # buys more games per minute on a CPU; every column is considered at the root.
        # 16 simulations and 8 updates per iteration (2 samples per collected step): one core,
        # seed 0, 20 minutes, 124 GFLOP/s matmul: solver keeps-result 0.567 at 1600 updates, against
        # 0.459 at 800 updates with 32 simulations and 4 updates (docs/board_games.md). On a CPU
        # the search is the expensive part, so each collected step is worth learning from twice.
        "planner.search_policy": "gumbel_muzero",
        "planner.num_simulations": 16,
        # Play searches more than training does (both agents): against mcts:1000 after 60 minutes,
        # seed 0, MuZero's best checkpoint scored 17-5-18 with 100 simulations and 13-0-27 with 16,
        # AlphaZero mode's 36-1-3 with 100, 34-1-5 with 16 and 33-1-6 with 400 (docs/board_games.md,
        # "Search at play time").
        "planner.play_simulations": 100,
        "train.updates_per_iteration": 8,
        "planner.max_num_considered_actions": 7,
        "planner.discount": 1.0,
        "network.support.min_value": -1,  # outcomes lie in [-1, 1] (see tic_tac_toe)
        "network.support.max_value": 1,
        # No phi squashing: a win is one-hot on the top category (docs/board_games.md).
        "network.support.transform": "identity",
        # Layer norm: acting and training compute the same function; batch norm's running moments
        # mostly described unrolled states (the prediction network runs K + 1 times per update).
        "network.normalization": "layer",
        "network.channels": 32,
        "network.representation_blocks": 3,
        "network.dynamics_blocks": 1,
        "loss.value_coef": 1.0,
        "targets.history_length": 1,
        "targets.td_steps": 42,  # the longest game: a Monte-Carlo return
        "targets.discount": 1.0,
        "env.num_envs": 32,
        "train.batch_size": 128,
        "replay.capacity": 200_000,
        "replay.min_fill": 2_000,
        # Uniform, as AlphaZero samples: with +-1 Monte-Carlo targets |v - z| mostly measures how
        # unpredictable a position still is, and proportional sampling down-weighted late positions.
        "replay.sampling": "uniform",
    },
    "go9": {
        # AlphaZero mode: the search plays pgx's go_9x9, the twin of OpenSpiel's 9x9 go, with the real
        # rules. MuZero on the earlier preset learned to pass: its mean self-play game fell from 121
        # moves to 3.7 within 300 updates, while AlphaZero mode, whose search sees two passes end the
        # game, played on (113-124 moves; docs/go.md, "Why AlphaZero mode").
        "agent": "alphazero",
        # What Connect Four's measurements chose (docs/board_games.md): Gumbel MuZero's policy target,
        # which is good with few simulations; outcomes in [-1, 1] one-hot on identity categories; layer
        # norm; full-weight value loss; 3 residual blocks; uniform replay of Monte-Carlo targets.
        "planner.search_policy": "gumbel_muzero",
        "planner.num_simulations": 32,
        "planner.max_num_considered_actions": 16,
        "planner.play_simulations": 64,
        # Never pass first; after the opponent's pass, pass exactly when the area count wins
        # (moozi/agent/pass_rule.py, docs/go.md).
        "planner.play_pass_rule": "after_opponent_if_ahead",
        "planner.discount": 1.0,
        "network.support.min_value": -1,
        "network.support.max_value": 1,
        "network.support.transform": "identity",
        "network.normalization": "layer",
        "network.representation_blocks": 3,
        "network.dynamics_blocks": 1,
        "loss.value_coef": 1.0,
        "targets.history_length": 1,
        "targets.td_steps": 200,
        "targets.discount": 1.0,
        "env.num_envs": 32,
        "train.batch_size": 128,
        # 16 updates per iteration (a sampled target per new step, 8 board symmetries): with 8 the
        # learner sat idle for 21 of each iteration's 29 s of acting (seed 0, both cores).
        "train.updates_per_iteration": 16,
        "train.test_every_updates": 500,
        "replay.capacity": 200_000,
        "replay.min_fill": 2_000,
        "replay.sampling": "uniform",
    },
    "cartpole": {
        "network.kind": "mlp",
        "planner.num_simulations": 50,  # muzero-general's cartpole setting
        "targets.history_length": 1,
        "targets.td_steps": 10,
        "env.num_envs": 16,
        "replay.capacity": 50_000,
        "replay.min_fill": 1_000,
    },
}
_MINATAR_PRESET = {
    # An MLP over the flattened 10x10xC planes, not the residual network: on a 2-core CPU XLA's small
    # convolutions are slow, and one core, seed 0, Asterix, gave 0.69 updates/s and 88 env steps/s with
    # 2+1 residual blocks of 32 channels against 16.8 updates/s and 2,150 env steps/s with this MLP
    # (24x both), so an hour buys ~25x the experience and updates. MinAtar's own DQN is small too
    # (one 16-channel convolution and a 128-unit layer). Breakout, 6 minutes on one core: training
    # return 5.3 at 494k env steps; the residual net took ~28 minutes on both cores to ~400k.
    "network.kind": "mlp",
    "network.mlp_hidden_sizes": (256, 256),
    "network.mlp_hidden_state_size": 128,
    "train.batch_size": 128,
    # PUCT with 16 simulations collapsed onto one action (visit entropy 0.01, policy entropy 0.3)
    # and Breakout's return stayed at the random policy's ~0.5 for 170k steps; Gumbel MuZero's
    # policy target improves on the prior even with few simulations and its acting keeps sampling.
    "planner.search_policy": "gumbel_muzero",
    "planner.num_simulations": 16,
    "targets.history_length": 2,
    "targets.td_steps": 10,
    "env.num_envs": 32,
    "replay.capacity": 200_000,
    "replay.min_fill": 2_000,
    # ~20 updates/s: a test of 20 episodes every 200 updates would take most of the run's time.
    "train.test_every_updates": 2_000,
}
for _name in ("breakout", "asterix", "freeway", "seaquest", "space_invaders"):
    PRESET_OVERRIDES[_name] = dict(_MINATAR_PRESET)
# Seaquest: the MinAtar paper's DQN exploration, epsilon-greedy from 1 to 0.1 over the first 100k
# frames, on top of Gumbel MuZero's own. Without it the prior's entropy fell to 0.13 (of ln 6 = 1.79)
# and 100 episodes gave 1.6 at 30 minutes (2.2M steps); with it the entropy stayed near 0.9 and they
# gave 3.3 at 30 (2.6M steps) and 6.9 at 60 (one core each, seed 0; README, "MinAtar"). The same
# schedule lowered Asterix (1.2 at 30 min against 3.1), so it stays Seaquest's alone.
# On a machine three times as fast (~50k updates by 30 minutes) the prior still collapsed. A value
# weight of 1 reached 10.2 at 30 minutes, then fell to 1.4 at 60 as its entropy went from 0.86 to 0.11.
# The entropy bonus c_H = 0.1 on top held it at 0.72-1.0, and 100 episodes gave 7.5 at 30 and 12.5
# at 60 minutes (103k updates). On Asterix, whose prior does not collapse (entropy ~0.58 either way),
# the same pair gave no gain (5.2 against 5.6 at 60), so it is an override, not the shared preset
# (docs/training.md, "What limits Asterix, Seaquest and Freeway"). Freeway takes the pair as well.
_COLLAPSING_PRIOR = {"loss.value_coef": 1.0, "loss.entropy_coef": 0.1}
# And one 3x3 convolution before the MLP (MinAtar's DQN torso): the MLP alone did not tell the states
# before a death from the rest (bench/episode_end.py). With it Seaquest gave 20.6 at 30 minutes
# against 7.5, and 11.8 at 60 against 12.5 (its tests swung between 8 and 31 over the second half).
# On Asterix it gave 3.6 / 3.5 against the preset's 4.4 / 5.6, so it is not shared.
# Then a floor of 0.1 of a reward on the range over which Gumbel MuZero's policy target rescales the
# root's Q-values (`planner.min_value_range`; mctx's own is 1e-8), with 2 updates per iteration. With
# mctx's floor any gap in Q, however small, became 5-7 logits between the best and the worst action,
# the stored targets went one-hot (entropy 0.45 -> 0.05) and the agent fell to waiting at ~9M env
# steps. With the floor, gaps under 0.1 stay a fraction of that: the prior's entropy held at 0.4-0.65
# to the end, 39.75 at 30 minutes (33k updates) and 17.6 at 60 (66k updates, 16.9M env steps) against
# 20.6 and 11.8, the kept best checkpoint (44k updates) 37.9 (one ~210 GFLOP/s core, seed 0). A floor
# of one reward stopped Freeway from learning to cross; 0.1 lets it (below). Freeway's cosine decay on
# top gave 54.7 at 30 minutes (seed 1: 53.4), then its tests fell as the rate did, 1.8 at 60: the
# rate stays constant here.
_Q_RANGE_FLOOR_WITH_TWO_UPDATES = {"planner.min_value_range": 0.1, "train.updates_per_iteration": 2}
# And the agent plays a moving average of the online parameters (the target network with
# `optimizer.target_ema_decay`, ~3,300 updates), not the online network: at a constant rate the online
# network's tests swung 10-48 between checkpoints 2,000 updates apart (17.6 at 60 minutes on a low one).
# Training is unchanged (the workers act with the online network; same seed, same run), and the
# average's tests over 34-52k updates were 50.0 ± 6.7 against the online network's 25.4 ± 12.0 (a
# decay of 0.999: 38.6 ± 11.8). 100 episodes: 44.0 at 30 minutes and 26.3 at 60 against the online
# network's 39.75 and 17.6 (the decay of 0.999: 40.3 and 32.75). It does not cure a late decline of the
# run itself: seed 1 gave 44.1 at 30 and 10.8 at 60, its online network 10.2 at the same checkpoint
# (one ~200 GFLOP/s core each, docs/training.md, "The agent plays a moving average of its parameters").
_AVERAGED_AGENT = {"optimizer.target_ema_decay": 0.9997, "train.agent_network": "target"}
PRESET_OVERRIDES["seaquest"].update({
    "train.epsilon_start": 1.0,
    "train.epsilon_end": 0.1,
    "train.epsilon_env_steps": 100_000,
    **_COLLAPSING_PRIOR,
    "network.mlp_conv_channels": 16,
    **_Q_RANGE_FLOOR_WITH_TWO_UPDATES,
    **_AVERAGED_AGENT,
})
# Freeway's prior collapses too (entropy 0.02-0.16 with the shared preset, 15.6 at 60 minutes, greedy;
# sampled 15.8). With the same pair: 23.0 at 30 and 22.1 at 60 minutes greedy, 29.9 sampled as in
# training (one core, seed 0; README, "MinAtar").
# Then Seaquest's convolution, a cosine decay of the learning rate to 5e-5 over 60k updates (about
# 35 minutes on a ~230 GFLOP/s core: the best checkpoints of earlier runs came before a late collapse),
# and no L2 term (through Adam it shrank the batch-normalised kernels by half over an hour): 46.0 at
# 30 minutes (sampled 47.1) and 28.9 at 60 greedy, against 23.0 and 22.1. Its tests still fell from
# 40-50 to ~30 after ~62k updates; the three changes were measured together, one seed.
# And 2 updates per iteration, not 4 (a replay ratio of 0.5 sampled targets per env step): on one
# ~250 GFLOP/s core the hour then holds 65k updates over 16.7M env steps (100k over 12.9M before), the
# decay's floor comes at the hour's end, and the tests stayed at 41-51 to the end: 49.25 [47.5, 50.8]
# at 60 minutes greedy (48.6 sampled) against 28.9, 43.3 at 30 against 46.0. Seaquest with the same
# change alone fell after ~33k updates (1.7 at 60 minutes); with the floor on the Q range it did not.
# And Seaquest's floor of 0.1 on that range: Freeway's gap between moving up and waiting is ~0.01 of a
# reward, so the floor shrinks its bonus from ~6 logits to about half a logit, not to nothing (the
# floor of 1 did that): 43.0 at 30 minutes and 55.8 [54.3, 57.0] at 60 (71k updates) greedy, 55.7
# sampled, against 43.3 and 49.25; tests 57-59 over the last 10k updates against 41-51 (one ~210
# GFLOP/s core, seed 0; docs/training.md, "What limits Asterix, Seaquest and Freeway").
# Asterix takes the floor and the 2 updates per iteration too, and nothing else of Seaquest's (its
# epsilon-greedy, the value weight and bonus, and the convolution each lowered Asterix, above). The
# shared preset gave 4.4 at 30 minutes and 5.6 at 60 (64k / 129k updates on a ~233 GFLOP/s core):
# its model did not tell a move onto an enemy from the others (docs/training.md). With the pair at
# a constant rate, 100 episodes gave 17.3 and 15.3 at 30 minutes (seeds 0 and 1, ~20.6k updates),
# then both runs declined: 10.2 and 13.5 at 60 (~41-43k updates). With a cosine decay of the rate to
# 5% over 40k updates on top (about the hour's updates on that machine; L2 kept): 19.6 [17.3, 22.0]
# at 30 minutes and 24.6 [21.3, 27.9] at 60, above DQN's 17.2 and AC(lambda)'s 19.3 (one core of a
# slow machine, ~190 GFLOP/s quiet, 88 as recorded with both cores busy; seed 0 only). On a faster
# machine the hour holds more updates and the rate sits at its floor for the rest; Freeway held
# there, Seaquest did not; not measured for Asterix. The moving average of the parameters
# (Seaquest's agent) lagged the rise (6.5 at 30 minutes, 10.8 at 60 at the constant rate), so
# Asterix's agent is the online network (docs/training.md, "Asterix takes the floor").
PRESET_OVERRIDES["asterix"].update({
    **_Q_RANGE_FLOOR_WITH_TWO_UPDATES,
    "optimizer.schedule": "cosine",
    "optimizer.decay_steps": 40_000,
    "optimizer.final_learning_rate_fraction": 0.05,
})
PRESET_OVERRIDES["freeway"].update({
    **_COLLAPSING_PRIOR,
    "network.mlp_conv_channels": 16,
    "optimizer.schedule": "cosine",
    "optimizer.decay_steps": 60_000,
    "optimizer.final_learning_rate_fraction": 0.05,
    "loss.l2_coef": 0.0,
    **_Q_RANGE_FLOOR_WITH_TWO_UPDATES,
})


# Every `atari:<game>`. The bridge already follows the ALE protocol of Machado et al. (2018): sticky
# actions 0.25, frame skip 4 with a max over the last two frames, 84x84 grey, no life-loss signal
# (docs/envs.md); frames are stacked by the history (4, as DQN and MuZero stack them).
ATARI_PRESET = {
    # MuZero's Atari network at CPU sizes: downsampled to a 6x6 hidden state, one block per stage.
    # At full 84x84 resolution one search of 16 simulations costs ~50x more on this machine.
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
LIBRARY_PRESETS: dict[str, dict[str, Any]] = {"atari": ATARI_PRESET}


def preset_overrides(game: str) -> dict[str, Any]:
    """The preset for a game name: its own, else its library's (`atari:<game>`), else none."""
    if game in PRESET_OVERRIDES:
        return dict(PRESET_OVERRIDES[game])
    library = game.split(":", 1)[0].lower() if ":" in game else None
    return dict(LIBRARY_PRESETS.get(library, {}))
