"""Checkpoints: round trip, atomicity under crashes, pruning, and refusal of bad or crafted files."""

import errno
import json
import os
import pathlib
import pickle
import signal
import subprocess
import sys
import textwrap

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from moozi.runs import checkpoint as ckpt
from moozi.runs.checkpoint import (
    CheckpointError,
    best_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    param_fingerprint,
    save_best_checkpoint,
    save_checkpoint,
)
from moozi.errors import MooziError

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


@flax.struct.dataclass
class _TrainState:
    """Shaped like the learner's state: params, batch stats, target params, optimizer state, step."""

    params: dict
    batch_stats: dict
    target_params: dict
    opt_state: optax.OptState
    step: jax.Array


class _Net(nn.Module):
    width: int = 4

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.width)(x)
        x = nn.BatchNorm(use_running_average=False)(x)
        return nn.Dense(2)(x)


_TX = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))


def _make_state(seed: int = 0, width: int = 4) -> _TrainState:
    variables = _Net(width).init(jax.random.PRNGKey(seed), jnp.ones((1, 3)))
    params = variables["params"]
    state = _TrainState(
        params=params,
        batch_stats=variables["batch_stats"],
        target_params=jax.tree_util.tree_map(lambda x: x * 0.5, params),
        opt_state=_TX.init(params),
        step=jnp.asarray(0, jnp.int32),
    )
    # One real Adam update so that mu, nu and count are not all zeros.
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    updates, opt_state = _TX.update(grads, state.opt_state, params)
    return state.replace(
        params=optax.apply_updates(params, updates), opt_state=opt_state, step=state.step + 1
    )


_STATE = _make_state()
_ARRAYS = {
    "replay/obs": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
    "replay/priorities": np.array([0.5, 1.5], np.float32),
    "rng/key": np.asarray(jax.random.key_data(jax.random.PRNGKey(7))),
    "replay/is_last": np.array([False, True]),
}
_META = {"game": "tic_tac_toe", "env_steps": 1234, "versions": {"params": 3}}


def _save(run_dir, step, **kwargs):
    kwargs.setdefault("train_state", _STATE)
    kwargs.setdefault("arrays", _ARRAYS)
    kwargs.setdefault("meta", _META)
    return save_checkpoint(run_dir, step, **kwargs)


def _load(path, **kwargs):
    kwargs.setdefault("train_state_template", _STATE)
    return load_checkpoint(path, **kwargs)


def _assert_trees_equal(a, b):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        assert np.shape(x) == np.shape(y) and np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _tmp_entries(run_dir):
    return [p.name for p in (pathlib.Path(run_dir) / "checkpoints").iterdir() if p.name.startswith(".")]


# --- round trip -----------------------------------------------------------------------------


def test_round_trip_restores_state_arrays_and_meta(tmp_path):
    path = _save(tmp_path, 10)
    assert path == tmp_path / "checkpoints" / "ckpt-0000000010"
    assert sorted(p.name for p in path.iterdir()) == ["arrays.npz", "meta.json", "train_state.msgpack"]

    state, arrays, meta = _load(path, expected_meta={"game": "tic_tac_toe"})
    _assert_trees_equal(state, _STATE)
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(state))
    assert arrays.keys() == _ARRAYS.keys()
    for key, value in _ARRAYS.items():
        assert arrays[key].dtype == value.dtype
        np.testing.assert_array_equal(arrays[key], value)
    assert meta["game"] == "tic_tac_toe" and meta["env_steps"] == 1234 and meta["versions"] == {"params": 3}
    assert meta["step"] == 10
    assert meta["train_state_fingerprint"] == param_fingerprint(_STATE)
    assert "moozi_version" in meta and "saved_at" in meta

    # The restored optimizer state is usable: one more Adam step works and matches the original's.
    grads = jax.tree_util.tree_map(jnp.ones_like, state.params)
    want, _ = _TX.update(grads, _STATE.opt_state, _STATE.params)
    got, _ = _TX.update(grads, state.opt_state, state.params)
    _assert_trees_equal(got, want)


def test_latest_points_at_newest_and_is_none_without_checkpoints(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    _save(tmp_path, 1)
    second = _save(tmp_path, 2)
    assert latest_checkpoint(tmp_path) == second
    assert (tmp_path / "checkpoints" / "LATEST").read_text().strip() == "ckpt-0000000002"


def test_keep_prunes_oldest_only(tmp_path):
    for step in range(1, 6):
        _save(tmp_path, step, keep=3)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith("ckpt-"))
    assert names == ["ckpt-0000000003", "ckpt-0000000004", "ckpt-0000000005"]
    assert _tmp_entries(tmp_path) == []


def test_resaving_a_step_replaces_it(tmp_path):
    _save(tmp_path, 3, meta={"game": "tic_tac_toe", "env_steps": 1})
    path = _save(tmp_path, 3, meta={"game": "tic_tac_toe", "env_steps": 2})
    assert _load(path)[2]["env_steps"] == 2
    assert _tmp_entries(tmp_path) == []


def test_best_checkpoint_replaces_the_previous_best_and_leaves_latest_alone(tmp_path):
    assert best_checkpoint(tmp_path) is None
    _save(tmp_path, 5)
    first = save_best_checkpoint(tmp_path, 4, train_state=_STATE, meta={"game": "tic_tac_toe", "best": {"score": 0.5}})
    assert first.name == "best-0000000004" and best_checkpoint(tmp_path) == first
    second = save_best_checkpoint(tmp_path, 8, train_state=_make_state(seed=3), meta={"game": "tic_tac_toe", "best": {"score": 0.7}})
    root = tmp_path / "checkpoints"
    assert best_checkpoint(tmp_path) == second and not first.exists()
    assert (root / "BEST").read_text().strip() == "best-0000000008"
    assert latest_checkpoint(tmp_path) == root / "ckpt-0000000005"  # best-* is not a resumable checkpoint
    state, arrays, meta = _load(second, expected_meta={"game": "tic_tac_toe"})
    _assert_trees_equal(state, _make_state(seed=3))
    assert arrays == {} and meta["best"] == {"score": 0.7} and meta["step"] == 8
    # Pruning resumable checkpoints never touches the best one.
    for step in range(6, 10):
        _save(tmp_path, step, keep=1)
    assert best_checkpoint(tmp_path) == second
    assert _tmp_entries(tmp_path) == []


def test_crash_before_best_is_repointed_keeps_a_complete_best(tmp_path, monkeypatch):
    good = save_best_checkpoint(tmp_path, 2, train_state=_STATE, meta={"game": "tic_tac_toe"})

    def no_replace(src, dst):
        raise OSError(errno.EIO, "Input/output error", str(src))

    # A crash after the new directory is in place but before BEST is rewritten: the new one
    # is complete, and it is the better one (a best checkpoint is only written when it is).
    monkeypatch.setattr(os, "replace", no_replace)
    with pytest.raises(CheckpointError, match="Input/output error"):
        save_best_checkpoint(tmp_path, 6, train_state=_STATE, meta={"game": "tic_tac_toe"})
    monkeypatch.undo()
    assert best_checkpoint(tmp_path) == tmp_path / "checkpoints" / "best-0000000006"
    assert good.exists()  # not yet removed: the old best goes only after BEST moved
    # A half-written best directory (no meta.json) is never chosen.
    half = tmp_path / "checkpoints" / "best-0000000009"
    half.mkdir()
    (half / "train_state.msgpack").write_bytes(b"\x00")
    assert best_checkpoint(tmp_path) == tmp_path / "checkpoints" / "best-0000000006"


@pytest.mark.slow
def test_fingerprint_depends_on_shapes_and_dtypes_not_values():
    assert param_fingerprint(_STATE) == param_fingerprint(_make_state(seed=1))
    assert param_fingerprint(_STATE) != param_fingerprint(_make_state(width=5))
    as_half = jax.tree_util.tree_map(lambda x: x.astype(jnp.float16) if x.dtype == jnp.float32 else x, _STATE)
    assert param_fingerprint(_STATE) != param_fingerprint(as_half)


# --- atomicity ------------------------------------------------------------------------------


def test_crash_while_writing_arrays_keeps_previous_checkpoint(tmp_path, monkeypatch):
    good = _save(tmp_path, 1)

    def savez_then_crash(file, *args, **kwargs):
        file.write(b"PK\x03\x04 half an archive")
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(np, "savez", savez_then_crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _save(tmp_path, 2)
    monkeypatch.undo()

    assert latest_checkpoint(tmp_path) == good
    assert not (tmp_path / "checkpoints" / "ckpt-0000000002").exists()
    _assert_trees_equal(_load(good)[0], _STATE)


def test_crash_at_rename_keeps_previous_checkpoint(tmp_path, monkeypatch):
    good = _save(tmp_path, 1)

    def no_rename(src, dst):
        raise OSError(errno.EIO, "Input/output error", str(src))

    monkeypatch.setattr(os, "rename", no_rename)
    with pytest.raises(CheckpointError, match="Input/output error"):
        _save(tmp_path, 2)
    monkeypatch.undo()
    assert latest_checkpoint(tmp_path) == good
    assert _tmp_entries(tmp_path) == []


def test_leftovers_of_a_killed_save_are_ignored_then_cleaned(tmp_path):
    good = _save(tmp_path, 1)
    root = tmp_path / "checkpoints"
    # What kill -9 can leave: a half-written temp dir and a stale LATEST temp file.
    partial = root / ".tmp-ckpt-0000000002-deadbeef"
    partial.mkdir()
    (partial / "train_state.msgpack").write_bytes(b"\x85\xa4half")
    (root / ".tmp-LATEST-deadbeef").write_text("ckpt-0000000002")
    # A checkpoint-named directory without meta.json (e.g. a copy interrupted by the user).
    incomplete = root / "ckpt-0000000009"
    incomplete.mkdir()
    (incomplete / "train_state.msgpack").write_bytes(b"")
    (incomplete / "arrays.npz").write_bytes(b"")

    assert latest_checkpoint(tmp_path) == good
    _save(tmp_path, 3)
    assert _tmp_entries(tmp_path) == []


@pytest.mark.parametrize("latest_text", [None, "ckpt-0000000099\n", "../../etc\n", "\x00\xff garbage"])
def test_latest_falls_back_to_scanning(tmp_path, latest_text):
    _save(tmp_path, 1)
    newest = _save(tmp_path, 2)
    latest_file = tmp_path / "checkpoints" / "LATEST"
    if latest_text is None:
        latest_file.unlink()
    else:
        latest_file.write_bytes(latest_text.encode("latin-1"))
    assert latest_checkpoint(tmp_path) == newest


def test_latest_skips_checkpoint_with_damaged_meta(tmp_path):
    older = _save(tmp_path, 1)
    newest = _save(tmp_path, 2)
    (newest / "meta.json").write_text('{"step": 2, "trunc')
    assert latest_checkpoint(tmp_path) == older


def test_kill_9_during_save_leaves_last_good_checkpoint(tmp_path):
    # A real SIGKILL in the middle of a save: the child saves step 1, then blocks
    # inside the save of step 2 after the state file is written, and is killed.
    script = textwrap.dedent(
        """
        import os, sys, time
        import numpy as np
        from moozi.runs import checkpoint
        run_dir = sys.argv[1]
        state = {"w": np.ones((2, 2), np.float32)}
        checkpoint.save_checkpoint(run_dir, 1, train_state=state, arrays={"a": np.zeros(3)}, meta={"game": "g"})
        real_fsync = os.fsync
        calls = []
        def fsync_then_hang(fd):
            real_fsync(fd)
            calls.append(fd)
            if len(calls) == 1:
                print("hanging", flush=True)
                time.sleep(600)
        os.fsync = fsync_then_hang
        checkpoint.save_checkpoint(run_dir, 2, train_state=state, arrays={"a": np.zeros(3)}, meta={"game": "g"})
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), JAX_PLATFORMS="cpu")
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert child.stdout.readline().strip() == "hanging"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert any(name.startswith(".tmp-ckpt-0000000002") for name in _tmp_entries(tmp_path))

    latest = latest_checkpoint(tmp_path)
    assert latest is not None and latest.name == "ckpt-0000000001"
    template = {"w": np.zeros((2, 2), np.float32)}
    state, _, meta = load_checkpoint(latest, train_state_template=template, expected_meta={"game": "g"})
    np.testing.assert_array_equal(state["w"], np.ones((2, 2), np.float32))


# --- bad files ------------------------------------------------------------------------------


class _Evil:
    """Unpickling this creates `marker`: proof that a loader executed stored code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _truncate(path: pathlib.Path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _random_bytes(path: pathlib.Path):
    path.write_bytes(np.random.default_rng(0).bytes(300))


def _pickle_as(path: pathlib.Path, marker):
    path.write_bytes(pickle.dumps({"params": _Evil(marker)}))


def _object_npz(path: pathlib.Path, marker):
    with open(path, "wb") as f:
        np.savez(f, allow_pickle=True, evil=np.array([_Evil(marker)], dtype=object))


def _npy_as_npz(path: pathlib.Path):
    with open(path, "wb") as f:
        np.save(f, np.zeros(3))


_BAD_FILES = {
    "truncated state": ("train_state.msgpack", _truncate),
    "random state": ("train_state.msgpack", _random_bytes),
    "pickle as msgpack": ("train_state.msgpack", _pickle_as),
    "truncated arrays": ("arrays.npz", _truncate),
    "random arrays": ("arrays.npz", _random_bytes),
    "object array npz": ("arrays.npz", _object_npz),
    "pickle as npz": ("arrays.npz", _pickle_as),
    "npy as npz": ("arrays.npz", _npy_as_npz),
    "truncated meta": ("meta.json", _truncate),
    "random meta": ("meta.json", _random_bytes),
    "meta not an object": ("meta.json", lambda p: p.write_text("[1, 2]")),
    "missing state": ("train_state.msgpack", lambda p: p.unlink()),
}


@pytest.mark.parametrize("case", sorted(_BAD_FILES))
def test_bad_file_raises_one_line_error_naming_it_and_runs_nothing(tmp_path, case):
    file_name, damage = _BAD_FILES[case]
    earlier = _save(tmp_path, 1)
    victim = _save(tmp_path, 2)
    marker = tmp_path / "marker-code-was-executed"
    if damage in (_pickle_as, _object_npz):
        damage(victim / file_name, marker)
    else:
        damage(victim / file_name)

    with pytest.raises(CheckpointError) as info:
        _load(victim)
    message = str(info.value)
    assert file_name in message
    assert "\n" not in message
    assert isinstance(info.value, MooziError)
    assert not marker.exists()
    # The earlier checkpoint is untouched and still loads.
    _assert_trees_equal(_load(earlier)[0], _STATE)


def test_checkpoint_of_another_game_is_refused(tmp_path):
    path = _save(tmp_path, 1, meta={"game": "connect_four"})
    with pytest.raises(CheckpointError, match=r"meta\.json.*connect_four.*tic_tac_toe"):
        _load(path, expected_meta={"game": "tic_tac_toe"})


def test_checkpoint_of_another_network_shape_is_refused(tmp_path):
    path = _save(tmp_path, 1)
    with pytest.raises(CheckpointError, match=r"train_state\.msgpack.*different network.*shape"):
        _load(path, train_state_template=_make_state(width=5))


def test_checkpoint_with_another_tree_structure_is_refused(tmp_path):
    path = _save(tmp_path, 1)
    template = _STATE.replace(params={**_STATE.params, "Extra_0": {"bias": jnp.zeros(2)}})
    with pytest.raises(CheckpointError, match=r"train_state\.msgpack.*missing Extra_0"):
        _load(path, train_state_template=template)


def test_meta_from_another_checkpoint_is_refused(tmp_path):
    path = _save(tmp_path, 1)
    meta = json.loads((path / "meta.json").read_text())
    meta["train_state_fingerprint"] = "0" * 64
    (path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="fingerprint"):
        _load(path)


def test_missing_checkpoint_directory(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint directory"):
        _load(tmp_path / "nope")


# --- refusing to write ----------------------------------------------------------------------


def test_object_arrays_and_nan_meta_are_refused_before_writing(tmp_path):
    with pytest.raises(CheckpointError, match="'bad'.*object"):
        _save(tmp_path, 1, arrays={"bad": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(CheckpointError, match="meta"):
        _save(tmp_path, 1, meta={"loss": float("nan")})
    assert latest_checkpoint(tmp_path) is None


def test_run_dir_under_a_regular_file_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(CheckpointError, match=r"cannot write checkpoint .*a_file"):
        _save(blocker / "run", 1)


def test_read_only_run_dir_is_a_clear_error(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_dir.chmod(0o500)
    try:
        if os.access(run_dir, os.W_OK):
            pytest.skip("running as a user that ignores directory permissions (root)")
        with pytest.raises(CheckpointError, match="Permission denied"):
            _save(run_dir, 1)
    finally:
        run_dir.chmod(0o700)


def test_full_disk_is_a_clear_error_and_keeps_previous_checkpoint(tmp_path, monkeypatch):
    good = _save(tmp_path, 1)

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(CheckpointError, match=r"ckpt-0000000002.*No space left on device"):
        _save(tmp_path, 2)
    monkeypatch.undo()
    assert latest_checkpoint(tmp_path) == good
    assert _tmp_entries(tmp_path) == []


def test_bad_step_and_keep(tmp_path):
    with pytest.raises(CheckpointError, match="step"):
        _save(tmp_path, -1)
    with pytest.raises(CheckpointError, match="keep"):
        _save(tmp_path, 1, keep=0)


def test_module_never_uses_pickle():
    source = pathlib.Path(ckpt.__file__).read_text()
    assert "import pickle" not in source and "allow_pickle=True" not in source
