"""Measuring playing strength: matches against opponents, an Elo ladder, solver-labelled positions.

`matches` plays an agent against an opponent (`moozi eval`); `ladder` and `elo`
rate many checkpoints on one scale (`moozi ladder`); `positions`,
`position_batch` and `position_eval` score the greedy move on solver-labelled
Connect Four positions (also the testing role's measure); `connect_four_solver`
wraps a perfect solver; `intervals` gives the confidence intervals they report.

The names of `matches` are available here (`from moozi.evaluation import
evaluate`), imported on first use, so that a role that only needs `intervals` or
`position_eval` does not load OpenSpiel's bots.
"""

import importlib


def __getattr__(name):
    matches = importlib.import_module("moozi.evaluation.matches")
    if name in matches.__all__:
        return getattr(matches, name)
    raise AttributeError(f"module 'moozi.evaluation' has no attribute {name!r}")
