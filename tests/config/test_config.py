"""Config: presets, strict overrides with errors naming the key and the allowed values, round-trips."""

import json

import pytest

from moozi.config import Config, PRESET_OVERRIDES, build_config, config_from_dict, config_to_dict, load_saved_config, save_config
from moozi.config.presets import preset_overrides
from moozi.config.overrides import ConfigError, parse_set_arguments
from moozi.core.planner import SearchPolicy
from moozi.errors import MooziError


def test_every_preset_builds():
    from moozi.envs.registry import resolve_game_name
    from moozi.envs.twins import pgx_twin

    for game in PRESET_OVERRIDES:
        config = build_config(game)
        # A preset in AlphaZero mode (go9) plays the pgx twin of its game, whose rules the search runs.
        assert config.game == (pgx_twin(resolve_game_name(game)) if config.agent == "alphazero" else game)


def test_override_types_are_parsed():
    config = build_config(
        "tic_tac_toe",
        overrides={
            "planner.num_simulations": "7",
            "optimizer.learning_rate": "3e-4",
            "planner.search_policy": "gumbel_muzero",
            "network.mlp_hidden_sizes": "32,16",
            "train.max_minutes": "none",
        },
    )
    assert config.planner.num_simulations == 7
    assert config.optimizer.learning_rate == pytest.approx(3e-4)
    assert config.planner.search_policy is SearchPolicy.GUMBEL_MUZERO
    assert config.network.mlp_hidden_sizes == (32, 16)
    assert config.train.max_minutes is None


def test_unknown_key_names_key_and_allowed():
    with pytest.raises(ConfigError, match=r"planner\.num_simulation.*did you mean num_simulations"):
        build_config("tic_tac_toe", overrides={"planner.num_simulation": "3"})
    with pytest.raises(ConfigError, match=r"unknown config key 'plnner'.*allowed keys"):
        build_config("tic_tac_toe", overrides={"plnner.num_simulations": "3"})


def test_bad_value_names_key_and_allowed_values():
    with pytest.raises(ConfigError, match=r"planner\.search_policy.*one of muzero, gumbel_muzero"):
        build_config("tic_tac_toe", overrides={"planner.search_policy": "alphabeta"})
    with pytest.raises(ConfigError, match=r"planner\.num_simulations.*an integer"):
        build_config("tic_tac_toe", overrides={"planner.num_simulations": "many"})
    with pytest.raises(ConfigError, match=r"backend\.kind.*'inline', 'ray'"):
        build_config("tic_tac_toe", overrides={"backend.kind": "spark"})
    with pytest.raises(ConfigError, match=r"env\.num_envs.*positive"):
        build_config("tic_tac_toe", overrides={"env.num_envs": "0"})
    with pytest.raises(ConfigError, match=r"train\.checkpoint_at_env_steps: expected positive env-step counts, got \[5, 0\]"):
        build_config("tic_tac_toe", overrides={"train.checkpoint_at_env_steps": "5,0"})
    assert build_config("tic_tac_toe", overrides={"train.checkpoint_at_env_steps": "5000000"}).train.checkpoint_at_env_steps == (5_000_000,)


def test_bootstrap_source_must_match_between_replay_and_learner():
    with pytest.raises(ConfigError, match=r"targets\.bootstrap_from='search' and loss\.bootstrap_from='target_network' differ"):
        build_config("seaquest", overrides={"loss.bootstrap_from": "target_network"})
    with pytest.raises(ConfigError, match=r"targets\.bootstrap_from='target_network' and loss\.bootstrap_from='search' differ"):
        build_config("seaquest", overrides={"targets.bootstrap_from": "target_network"})
    both = build_config("seaquest", overrides={"targets.bootstrap_from": "target_network", "loss.bootstrap_from": "target_network"})
    assert both.loss.bootstrap_from == "target_network"


def test_agent_network_is_checked_against_its_values_and_the_agent():
    with pytest.raises(ConfigError, match=r"train\.agent_network.*'online', 'target'"):
        build_config("seaquest", overrides={"train.agent_network": "averaged"})
    with pytest.raises(ConfigError, match=r"train\.agent_network='target' needs agent=muzero, agent=alphazero or "
                       r"agent=stochastic_muzero"):
        build_config("seaquest", overrides={"agent": "ppo", "train.agent_network": "target"})
    with pytest.raises(MooziError, match=r"optimizer\.target_ema_decay must be in \[0, 1\), got 1\.5"):
        build_config("seaquest", overrides={"optimizer.target_ema_decay": "1.5"})
    config = build_config("seaquest", overrides={"train.agent_network": "target", "optimizer.target_ema_decay": "0.999"})
    assert (config.train.agent_network, config.optimizer.target_ema_decay) == ("target", 0.999)


def test_set_argument_parsing():
    assert parse_set_arguments(["a.b=1", "c = x=y"]) == {"a.b": "1", "c": "x=y"}
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_set_arguments(["novalue"])


def test_saved_config_round_trip(tmp_path):
    config = build_config("breakout", overrides={"seed": "5", "planner.search_policy": "gumbel_muzero"})
    save_config(config, tmp_path / "config.json")
    assert load_saved_config(tmp_path / "config.json") == config
    assert config_from_dict(json.loads(json.dumps(config_to_dict(config)))) == config


def test_config_file_toml_and_errors(tmp_path):
    good = tmp_path / "c.toml"
    good.write_text("seed = 3\n[planner]\nnum_simulations = 11\n")
    config = build_config("tic_tac_toe", config_file=good)
    assert (config.seed, config.planner.num_simulations) == (3, 11)
    bad = tmp_path / "bad.toml"
    bad.write_text("[planner\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        build_config("tic_tac_toe", config_file=bad)
    with pytest.raises(ConfigError, match="cannot read config file"):
        build_config("tic_tac_toe", config_file=tmp_path / "missing.toml")


def test_defaults_are_the_thesis_network():
    network = Config().network
    assert (network.channels, network.representation_blocks, network.prediction_blocks, network.dynamics_blocks) == (32, 6, 1, 2)


def test_value_transform_is_a_checked_setting():
    config = build_config("connect_four", overrides={"network.support.transform": "identity"})
    assert config.network.support.transform == "identity"
    with pytest.raises(ConfigError, match=r"network\.support\.transform.*phi, identity"):
        build_config("connect_four", overrides={"network.support.transform": "log"})


def test_atari_games_get_the_atari_preset_and_own_presets_win():
    from moozi.config import LIBRARY_PRESETS

    for game in ("atari:Pong", "atari:breakout", "atari:space_invaders"):
        config = build_config(game)
        assert config.network.downsample and config.targets.history_length == 4
        assert config.replay.capacity == LIBRARY_PRESETS["atari"]["replay.capacity"]
    minatar = build_config("breakout")  # a preset of its own (MinAtar), not the Atari one
    assert not minatar.network.downsample and minatar.targets.history_length == 2
    assert not build_config("openspiel:catch").network.downsample  # libraries without a preset: none
    overridden = build_config("atari:Pong", overrides={"replay.capacity": "50000"})
    assert overridden.replay.capacity == 50_000  # --set still wins over the preset


def test_every_minatar_game_gets_one_preset_whatever_its_name():
    # One MinAtar preset (issue: general means one preset): the five preset names and `minatar:<game>`
    # give the same config but for the game's name, and that config is the MinAtar library preset's.
    from dataclasses import replace

    from moozi.config import LIBRARY_PRESETS
    from moozi.config.loading import apply_overrides
    from moozi.config.presets import preset_overrides
    from moozi.config.schema import Config

    expected = apply_overrides(Config(), LIBRARY_PRESETS["minatar"])
    for game in MINATAR:
        assert preset_overrides(game) == preset_overrides(f"minatar:{game}") == LIBRARY_PRESETS["minatar"]
        for name in (game, f"minatar:{game}"):
            config = build_config(name)
            assert config.game == name
            assert replace(config, game=expected.game) == expected, name
    # The settings the candidates' runs measured, spot-checked: a change here is a new candidate.
    assert expected.network.kind == "mlp" and expected.network.mlp_conv_channels == 16
    assert expected.planner.search_policy.value == "gumbel_muzero" and expected.planner.min_value_range == 0.1
    assert (expected.loss.entropy_floor, expected.loss.l2_coef, expected.train.updates_per_iteration) == (0.1, 0.0, 2)
    assert expected.optimizer.weight_decay == 0.01  # v24: AdamW's decay in place of the L2 term
    assert (expected.optimizer.decay_over, expected.optimizer.decay_start) == ("run", 0.5)
    overridden = build_config("minatar:breakout", overrides={"planner.num_simulations": "8"})
    assert overridden.planner.num_simulations == 8  # --set still wins over the preset


def test_each_preset_override_changes_its_own_setting_and_nothing_else():
    # A game's preset differs from the base config (or, for a MinAtar game, from the one MinAtar
    # preset) exactly where it names a setting: no override is a no-op, none leaks into another
    # key. The values themselves, and why, live in moozi/config/presets.py and the docs it links.
    from moozi.config.overrides import flatten_overrides, to_dict
    from moozi.config.schema import Config

    def flat(config):
        return {k: v for k, v in flatten_overrides(to_dict(config)).items() if k not in ("game", "agent")}

    shared = PRESET_OVERRIDES["breakout"]
    for game in PRESET_OVERRIDES:
        preset = preset_overrides(game)  # with the part for the preset's own agent (go9: AlphaZero mode)
        base, reference = (shared, build_config("breakout")) if game in MINATAR else ({}, Config(game=game))
        own = {k for k, v in preset.items() if k != "agent" and base.get(k, object()) != v}
        before, after = flat(reference), flat(build_config(game))
        changed = {k for k in after if after[k] != before.get(k)}
        if build_config(game).agent == "alphazero":
            changed.discard("targets.num_unroll_steps")  # AlphaZero mode unrolls nothing (config/loading.py)
        assert changed == own, (game, sorted(changed ^ own))
    assert PRESET_OVERRIDES["space_invaders"] == shared  # the shared MinAtar preset, as it is


def test_a_presets_agent_part_follows_the_runs_agent_wherever_it_is_set(tmp_path):
    # connect_four's preset has a part for AlphaZero mode only (moozi/config/presets.py).
    from moozi.config.presets import AGENT_PRESET_OVERRIDES

    part = AGENT_PRESET_OVERRIDES["connect_four"]["alphazero"]
    muzero = build_config("connect_four")
    assert (muzero.optimizer.schedule, muzero.planner.gumbel_scale) == (Config().optimizer.schedule, 1.0)
    toml = tmp_path / "az.toml"
    toml.write_text('agent = "alphazero"\n')
    for config in (build_config("connect_four", overrides={"agent": "alphazero"}), build_config("connect_four", config_file=toml)):
        assert config.agent == "alphazero"
        assert (config.optimizer.schedule, config.optimizer.decay_over) == (part["optimizer.schedule"], part["optimizer.decay_over"])
        assert config.optimizer.final_learning_rate_fraction == part["optimizer.final_learning_rate_fraction"]
        assert config.planner.gumbel_scale == part["planner.gumbel_scale"] == 2.0
        # Everything else is the game's preset, as MuZero gets it.
        assert config.network == muzero.network and config.planner.num_simulations == muzero.planner.num_simulations
    # --set still wins over the agent's part, and a config file's agent loses to --set's.
    assert build_config("connect_four", overrides={"agent": "alphazero", "planner.gumbel_scale": "1"}).planner.gumbel_scale == 1.0
    back = build_config("connect_four", config_file=toml, overrides={"agent": "muzero"})
    assert (back.agent, back.planner.gumbel_scale) == ("muzero", 1.0)


MINATAR = ("breakout", "asterix", "freeway", "seaquest", "space_invaders")
