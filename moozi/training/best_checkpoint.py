"""Which tested parameters a run keeps as its best checkpoint (RUN/checkpoints/BEST), shared by every
driver: the score of an in-training test (`strength_score`) and the rule that picks the best
(`next_best`)."""

from __future__ import annotations

import math

from moozi.evaluation.intervals import Z_95


def strength_score(test_metrics: dict, episodes: int) -> tuple[str | None, float, float]:
    """(name, score, standard error) of the in-training test that picks the best checkpoint:
    Connect Four's solver keeps-result rate (a fixed labelled set, so no game noise), else the
    score against the random player (win + draw / 2), else the mean return. The error of a rate
    comes from its logged 95% Wilson interval, which stays honest at 0 and 1."""
    if "test_solver_keeps_result" in test_metrics:
        half = (test_metrics["test_solver_keeps_result_ci_high"] - test_metrics["test_solver_keeps_result_ci_low"]) / 2
        return "test_solver_keeps_result", float(test_metrics["test_solver_keeps_result"]), half / Z_95
    if "test_win_rate" in test_metrics:
        score = test_metrics["test_win_rate"] + 0.5 * test_metrics.get("test_draw_rate", 0.0)
        half = (test_metrics["test_win_rate_ci_high"] - test_metrics["test_win_rate_ci_low"]) / 2
        return "test_score", float(score), half / Z_95
    if "test_return" in test_metrics:
        se = test_metrics.get("test_return_std", 0.0) / math.sqrt(max(episodes, 1))
        return "test_return", float(test_metrics["test_return"]), float(se)
    return None, 0.0, 0.0


def next_best(best: dict | None, name: str, score: float, se: float, update: int) -> dict | None:
    """The new best-checkpoint record, or None to keep `best`.

    The newest tested parameters become the best unless they are measurably worse (95%, the
    difference of two independent estimates) than the peak: the highest score tested so far.
    Keeping the single highest score instead would keep whichever early checkpoint the test's
    noise flattered (on Connect Four a 200-update checkpoint stayed "best" over a 1,300-update
    one that beat random 88 to 77 games); measuring against the peak, not the current best,
    keeps a slow decline from passing unnoticed one small step at a time.
    """
    peak = best["peak"] if best is not None and best["name"] == name else None
    if peak is not None and score < peak["score"] - Z_95 * math.hypot(se, peak["se"]):
        return None
    if peak is None or score > peak["score"]:
        peak = {"score": score, "se": se, "update": update}
    return {"name": name, "score": score, "se": se, "update": update, "peak": peak}
