"""The bundled solver-labelled Connect Four positions: schema, labels, phases, the random-mover baseline."""

import json

import numpy as np
import pyspiel
import pytest

from moozi.errors import MooziError
from moozi.evaluation.positions import (
    DEFAULT_PATH,
    FORMAT,
    PHASES,
    LabelledPosition,
    load_positions,
    phase_of,
    random_mover_baseline,
    stratified_subset,
)

GAME = pyspiel.load_game("connect_four")
POSITIONS = load_positions().positions


def _state(moves):
    state = GAME.new_initial_state()
    for move in moves:
        assert not state.is_terminal()
        state.apply_action(move)
    return state


def test_file_has_its_format_and_a_header_saying_how_it_was_made():
    data = json.loads(DEFAULT_PATH.read_text())
    assert data["format"] == FORMAT
    header = data["header"]
    assert header["made_by"].startswith("python bench/make_connect_four_positions.py --seed ")
    assert "bitbully" in header["solver"]
    assert set(header["sources"]) == {"mcts_selfplay", "mcts_vs_solver", "random_play"}
    assert "every legal move keeps the result were dropped" in header["selection"]
    assert header["phases"] == {name: list(bounds) for name, bounds in PHASES.items()}
    assert len(data["positions"]) == len(POSITIONS)


def test_positions_are_distinct_reachable_non_terminal_boards_with_consistent_labels():
    boards = set()
    for p in POSITIONS:
        state = _state(p.moves)
        assert not state.is_terminal()
        boards.add(str(state))
        assert p.to_play == state.current_player() and p.ply == len(p.moves) and p.phase == phase_of(p.ply)
        assert list(p.legal_moves) == state.legal_actions()  # scores are null exactly on full columns
        scores = {c: s for c, s in enumerate(p.scores) if s is not None}
        top = max(scores.values())
        assert list(p.best_moves) == [c for c in scores if scores[c] == top]
        assert list(p.keeping_moves) == [c for c in scores if np.sign(scores[c]) == np.sign(top)]
        assert p.value == np.sign(top)
        # Every position tells good moves from bad, but those lost for the mover (kept for the value's sign).
        assert p.informative == (len(p.keeping_moves) < len(p.legal_moves)) == (p.value >= 0)
    assert len(boards) == len(POSITIONS)


def test_phases_are_roughly_balanced_and_every_source_contributes():
    informative = [p for p in POSITIONS if p.informative]
    assert 500 <= len(informative) <= 700
    for phase in PHASES:
        in_phase = [p for p in informative if p.phase == phase]
        assert 150 <= len(in_phase) <= 250, phase
        assert {p.source for p in in_phase} == {"mcts_selfplay", "mcts_vs_solver", "random_play"}
        assert 20 <= sum(p.phase == phase and p.value == -1 for p in POSITIONS) <= 60, phase
    assert {p.value for p in informative} == {0, 1}


def test_labels_agree_with_a_fresh_solver_call_on_a_sample():
    c4 = pytest.importorskip("moozi.evaluation.connect_four_solver")
    pytest.importorskip("bitbully")
    rng = np.random.default_rng(1)
    for index in rng.choice(len(POSITIONS), size=40, replace=False):
        p = POSITIONS[index]
        scores = c4.score_moves(list(p.moves))
        assert tuple(scores.get(c) for c in range(7)) == p.scores, p.moves
        assert tuple(c4.best_moves(scores)) == p.best_moves
        assert tuple(c4.result_keeping_moves(scores)) == p.keeping_moves
        assert c4.value_of(scores) == p.value


def _position(moves, scores, keeping, best, value=1):
    return LabelledPosition(moves=tuple(moves), scores=tuple(scores), best_moves=tuple(best),
                            keeping_moves=tuple(keeping), value=value, source="hand")


def test_random_mover_baseline_by_hand_on_three_positions():
    # Invented labels: the baseline reads only the ply and how many moves are legal, keep, are best.
    positions = [
        # early, 7 legal moves: 1 keeps the win, and it is the best
        _position([], [-2, -1, 0, 1, 0, -1, -2], keeping=[3], best=[3]),
        # middle (14 plies), 7 legal moves: 4 keep the draw, 2 of them best
        _position([0] * 6 + [1] * 6 + [2, 2], [0, 0, -3, 0, -1, 0, -2], keeping=[0, 1, 3, 5], best=[0, 1, 3, 5],
                  value=0),
        # late (28 plies), 5 legal moves (columns 0 and 1 full): 2 keep the win, 1 best
        _position([0] * 6 + [1] * 6 + [2] * 6 + [4] * 6 + [5, 5, 6, 6], [None, None, 3, -1, 5, -2, -4],
                  keeping=[2, 4], best=[4]),
    ]
    baseline = random_mover_baseline(positions)
    assert baseline["keeps_result"]["early"] == pytest.approx(1 / 7)
    assert baseline["keeps_result"]["middle"] == pytest.approx(4 / 7)
    assert baseline["keeps_result"]["late"] == pytest.approx(2 / 5)
    assert baseline["keeps_result"]["all"] == pytest.approx((1 / 7 + 4 / 7 + 2 / 5) / 3)
    assert baseline["best_move"]["all"] == pytest.approx((1 / 7 + 4 / 7 + 1 / 5) / 3)


def test_header_baseline_matches_the_positions():
    header = load_positions().header
    for measure, shares in random_mover_baseline(POSITIONS).items():
        for phase, value in shares.items():
            assert header["random_mover_baseline"][measure][phase] == pytest.approx(value, abs=1e-4)


def test_stratified_subset_is_fixed_and_even_over_phases():
    subset = stratified_subset(POSITIONS, 200)
    assert subset == stratified_subset(POSITIONS, 200)
    assert len(subset) == 200 and len(set(subset)) == 200
    counts = sorted(sum(p.phase == phase for p in subset) for phase in PHASES)
    assert counts == [66, 67, 67]
    assert stratified_subset(POSITIONS[:10], 200) == POSITIONS[:10]


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "not valid JSON"),
        ('{"format": "other"}', "not a labelled position file"),
        ('{"format": "%s", "positions": [{"moves": [0]}]}' % FORMAT, "damaged position"),
    ],
)
def test_a_damaged_file_is_refused_in_one_line(tmp_path, text, message):
    path = tmp_path / "positions.json"
    path.write_text(text)
    with pytest.raises(MooziError, match=message) as info:
        load_positions(path)
    assert "\n" not in str(info.value)
