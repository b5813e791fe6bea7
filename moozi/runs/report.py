"""`moozi report RUN_DIR`: learning curves as PNG files and a markdown summary.

Reads `RUN/metrics.jsonl` and writes into `RUN/report/`: one PNG per group of
metrics that the log contains, and `summary.md` with the run's config, the
final and best value of every metric, and links to the PNGs.

A metric series is one (role, metric name) pair. Its group is the first rule
that matches the name (or role):

    losses      the name is `loss` or ends in `_loss`              best = lowest
    throughput  the name contains `per_s`                          best = highest
    evaluation  role `test`/`eval`, or the name contains `return`,
                `win_rate`, `draw_rate`, `score` or `episode_reward`  best = highest
    search      the name starts with `search` or contains `visit`,
                `root_value`, `tree_depth` or `mcts`
    replay      the name contains `replay`, `buffer`, `priorit` or `importance`
    other       everything else
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
from typing import Any, Callable

from moozi.errors import MooziError
from moozi.runs.metrics_log import METRICS_FILE, RESERVED_KEYS, read_metrics

REPORT_DIR = "report"
SUMMARY_FILE = "summary.md"
CONFIG_FILE = "config.json"


class ReportError(MooziError):
    """The report cannot be made (no run directory, no metrics yet, unwritable report folder)."""


@dataclasses.dataclass(frozen=True)
class _Group:
    name: str  # also the PNG's file stem
    title: str
    matches: Callable[[str | None, str], bool]  # (role, metric name) -> belongs here
    best: Callable[..., float] | None  # min or max over the series; None where "best" means nothing


def _contains_any(name: str, parts: tuple[str, ...]) -> bool:
    return any(part in name for part in parts)


# Order matters: a series belongs to the first group that matches it.
_GROUPS = (
    _Group("losses", "Losses", lambda role, n: n == "loss" or n.endswith("_loss"), min),
    _Group("throughput", "Throughput", lambda role, n: "per_s" in n, max),
    _Group(
        "evaluation",
        "Evaluation",
        lambda role, n: role in ("test", "eval")
        or _contains_any(n, ("return", "win_rate", "draw_rate", "score", "episode_reward")),
        max,
    ),
    _Group(
        "search",
        "Search statistics",
        lambda role, n: n.startswith("search") or _contains_any(n, ("visit", "root_value", "tree_depth", "mcts")),
        None,
    ),
    _Group("replay", "Replay statistics", lambda role, n: _contains_any(n, ("replay", "buffer", "priorit", "importance")), None),
    _Group("other", "Other metrics", lambda role, n: True, None),
)


@dataclasses.dataclass(frozen=True)
class _Series:
    role: str | None
    name: str
    steps: tuple[int, ...]  # [T], ascending
    values: tuple[float, ...]  # [T], may hold NaN and inf

    @property
    def label(self) -> str:
        return f"{self.role}/{self.name}" if self.role else self.name


def write_report(run_dir: str | os.PathLike) -> list[pathlib.Path]:
    """Writes the PNG learning curves and summary.md into RUN/report/; returns their paths (summary last)."""
    run_dir = pathlib.Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"no run directory at {run_dir}")
    records = read_metrics(run_dir)
    if not records:
        raise ReportError(f"no metrics in {run_dir / METRICS_FILE} yet")
    grouped = _group(_series(records))

    out_dir = run_dir / REPORT_DIR
    written: list[pathlib.Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for group in _GROUPS:
            png = out_dir / f"{group.name}.png"
            if group.name in grouped:
                _plot(group.title, grouped[group.name], png)
                written.append(png)
            else:
                png.unlink(missing_ok=True)  # a stale curve from an earlier report of a longer log
        summary = out_dir / SUMMARY_FILE
        summary.write_text(_summary(run_dir, records, grouped), encoding="utf-8")
    except OSError as e:
        raise ReportError(f"cannot write the report into {out_dir}: {e.strerror or e}") from e
    written.append(summary)
    return written


def _series(records: list[dict[str, Any]]) -> list[_Series]:
    points: dict[tuple[str | None, str], list[tuple[int, float]]] = {}
    for record in records:
        role = record.get("role")
        for name, value in record.items():
            if name in RESERVED_KEYS or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            points.setdefault((role, name), []).append((record["step"], float(value)))
    out = []
    for (role, name), pts in points.items():
        pts.sort(key=lambda p: p[0])  # stable: equal steps keep their logged order
        out.append(_Series(role, name, tuple(p[0] for p in pts), tuple(p[1] for p in pts)))
    return sorted(out, key=lambda s: s.label)


def _group(series: list[_Series]) -> dict[str, list[_Series]]:
    grouped: dict[str, list[_Series]] = {}
    for s in series:
        group = next(g for g in _GROUPS if g.matches(s.role, s.name))
        grouped.setdefault(group.name, []).append(s)
    return grouped


def _plot(title: str, series: list[_Series], path: pathlib.Path) -> None:
    # Figure + the Agg canvas directly, not pyplot: no global backend switch, no GUI, no state left behind.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = min(3, len(series))
    rows = math.ceil(len(series) / cols)
    fig = Figure(figsize=(4.5 * cols, 3.2 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(title)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, s in zip(axes, series):
        # inf cannot be drawn; NaN leaves a visible gap in the curve.
        values = [v if math.isfinite(v) else math.nan for v in s.values]
        ax.plot(s.steps, values, marker="." if len(values) <= 50 else None, linewidth=1.2)
        ax.set_title(s.label, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes[len(series) :]:
        ax.set_visible(False)
    fig.savefig(path, dpi=100, format="png")


def _summary(run_dir: pathlib.Path, records: list[dict[str, Any]], grouped: dict[str, list[_Series]]) -> str:
    steps = [r["step"] for r in records]
    times = [r["time"] for r in records if isinstance(r.get("time"), (int, float)) and math.isfinite(r["time"])]
    lines = [
        f"# moozi report: {run_dir.name}",
        "",
        f"- run directory: `{run_dir}`",
        f"- {len(records)} records in `{METRICS_FILE}`, steps {min(steps)} to {max(steps)}"
        + (f", {max(times):.0f} s of wall time" if times else ""),
        "",
        "## Config",
        "",
        *_config_lines(run_dir / CONFIG_FILE),
        "",
        "## Metrics",
        "",
        "| group | metric | final | at step | best | at step |",
        "|---|---|---|---|---|---|",
    ]
    for group in _GROUPS:
        for s in grouped.get(group.name, []):
            final_step, final = s.steps[-1], s.values[-1]
            best_cells = "| – | –"
            finite = [(v, t) for t, v in zip(s.steps, s.values) if math.isfinite(v)]
            if group.best is not None and finite:
                best_value, best_step = group.best(finite, key=lambda p: p[0])
                best_cells = f"| {_fmt(best_value)} | {best_step}"
            lines.append(f"| {group.name} | `{s.label}` | {_fmt(final)} | {final_step} {best_cells} |")
    lines += ["", "## Learning curves", ""]
    for group in _GROUPS:
        if group.name in grouped:
            lines += [f"### {group.title}", "", f"![{group.title}]({group.name}.png)", ""]
    return "\n".join(lines) + "\n"


def _config_lines(path: pathlib.Path) -> list[str]:
    if not path.is_file():
        return [f"No `{CONFIG_FILE}` in the run directory."]
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return [f"`{CONFIG_FILE}` could not be read: {' '.join(str(e).split())}"]
    return ["```json", json.dumps(config, indent=2), "```"]


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"
