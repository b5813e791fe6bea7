"""The metrics log: JSON lines, non-finite values, resume truncation, TensorBoard events."""

import json
import math
import struct

import numpy as np
import pytest
from tensorboardX.proto import event_pb2

from moozi.runs.metrics_log import MetricsLogError, MetricsLogger, read_metrics


def _events(run_dir):
    """Every Event proto in the TensorBoard event files of `run_dir`, read without tensorboard."""
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        # TFRecord framing: uint64 length, uint32 crc, payload, uint32 crc.
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            payload = data[offset + 12 : offset + 12 + length]
            offset += 12 + length + 4
            yield event_pb2.Event.FromString(payload)


def _scalar_events(run_dir):
    """(tag, step, value) of every scalar in the TensorBoard event files."""
    return [(v.tag, e.step, v.simple_value) for e in _events(run_dir) for v in e.summary.value]


def _lines(run_dir):
    return (run_dir / "metrics.jsonl").read_text().splitlines()


def test_writes_one_json_line_per_call_with_step_time_role(tmp_path):
    with MetricsLogger(tmp_path) as log:
        log.write(1, {"policy_loss": 0.5, "env_steps": 10}, role="learner")
        log.write(2, {"test_return": np.float32(3.5), "games": np.int64(4)})
    lines = _lines(tmp_path)
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["step"] == 1 and first["role"] == "learner"
    assert first["policy_loss"] == 0.5 and first["env_steps"] == 10
    assert isinstance(first["time"], float) and first["time"] >= 0
    assert "role" not in second and second["test_return"] == 3.5
    assert second["games"] == 4 and isinstance(second["games"], int)
    assert second["time"] >= first["time"]
    assert read_metrics(tmp_path) == [first, second]


def test_non_finite_values_stay_valid_json_and_read_back_as_floats(tmp_path):
    with MetricsLogger(tmp_path) as log:
        log.write(1, {"a": float("nan"), "b": float("inf"), "c": -np.inf, "d": 1.0})
    (line,) = _lines(tmp_path)
    raw = json.loads(line, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert raw["a"] == "NaN" and raw["b"] == "Infinity" and raw["c"] == "-Infinity"
    (record,) = read_metrics(tmp_path)
    assert math.isnan(record["a"]) and record["b"] == math.inf and record["c"] == -math.inf and record["d"] == 1.0


def test_resume_drops_lines_after_the_checkpoint_step(tmp_path):
    uninterrupted = tmp_path / "uninterrupted"
    with MetricsLogger(uninterrupted) as log:
        for step in range(1, 6):
            log.write(step, {"loss": float(step)})

    resumed = tmp_path / "resumed"
    with MetricsLogger(resumed) as log:
        for step in range(1, 8):  # crashed after step 7; the last checkpoint was at step 3
            log.write(step, {"loss": float(step) * (1 if step <= 3 else 100)})
    with MetricsLogger(resumed, resume_from_step=3) as log:
        assert [r["step"] for r in read_metrics(resumed)] == [1, 2, 3]
        for step in range(4, 6):
            log.write(step, {"loss": float(step)})

    def without_time(records):
        return [{k: v for k, v in r.items() if k != "time"} for r in records]

    assert without_time(read_metrics(resumed)) == without_time(read_metrics(uninterrupted))
    times = [r["time"] for r in read_metrics(resumed)]
    assert times == sorted(times)  # the clock continues from the kept log
    assert not list(resumed.glob(".metrics.jsonl.tmp"))
    # TensorBoard is told to hide the abandoned steps 4..7 of the first attempt.
    purges = [e.step for e in _events(resumed) if e.session_log.status == event_pb2.SessionLog.START]
    assert purges == [4]


def test_a_line_cut_off_by_a_crash_is_dropped(tmp_path):
    with MetricsLogger(tmp_path) as log:
        log.write(1, {"loss": 1.0})
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 2, "loss": 0.')  # kill -9 mid-line
    assert [r["step"] for r in read_metrics(tmp_path)] == [1]
    with MetricsLogger(tmp_path) as log:
        log.write(2, {"loss": 0.5})
    assert [json.loads(line)["step"] for line in _lines(tmp_path)] == [1, 2]


def test_damaged_line_in_the_middle_is_a_clear_error(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(MetricsLogError, match=r"metrics\.jsonl line 2"):
        read_metrics(tmp_path)


def test_read_metrics_without_a_log_is_empty(tmp_path):
    assert read_metrics(tmp_path) == []


def test_tensorboard_scalars_are_written_with_role_tags(tmp_path):
    with MetricsLogger(tmp_path) as log:
        log.write(5, {"value_loss": 0.25}, role="learner")
        log.write(6, {"env_steps_per_s": 100.0})
    events = _scalar_events(tmp_path)
    assert ("learner/value_loss", 5, 0.25) in events
    assert ("env_steps_per_s", 6, 100.0) in events


def test_bad_metric_names_and_values_are_refused(tmp_path):
    with MetricsLogger(tmp_path) as log:
        with pytest.raises(ValueError, match="reserved"):
            log.write(1, {"step": 1.0})
        with pytest.raises(TypeError, match="'x' must be a number"):
            log.write(1, {"x": "high"})
        with pytest.raises(TypeError, match="'v' must be a number"):
            log.write(1, {"v": np.zeros(3)})
    assert read_metrics(tmp_path) == []


def test_unwritable_run_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(MetricsLogError, match="a_file"):
        MetricsLogger(blocker / "run")
