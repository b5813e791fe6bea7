"""VectorEnv: batched outputs equal B single envs for every P, errors cross processes, nothing leaks."""

from __future__ import annotations

import functools
import gc
import pathlib

import numpy as np
import pytest

import moozi.envs.testing as conformance
from moozi.envs import gym as gym_bridge
from moozi.envs import minatar, openspiel
from moozi.envs.base import DUMMY_ACTION, StepOutput
from moozi.envs.vector import VectorEnv
from moozi.errors import IllegalActionError, MooziError, UnknownGameError

BREAKOUT = functools.partial(minatar.make, "breakout")
CARTPOLE = functools.partial(gym_bridge.make_gym, "CartPole-v1")


def _copy(out: StepOutput) -> StepOutput:
    return StepOutput(*(np.array(x) for x in out))


def _random_actions(rng: np.random.Generator, legal: np.ndarray) -> np.ndarray:
    return np.array([rng.choice(np.flatnonzero(mask)) for mask in legal])


def _run_batched(vec: VectorEnv, num_steps: int, seed: int, split: bool = False) -> list[StepOutput]:
    """Random legal play; with `split`, each step is a step_async + step_wait pair."""
    rng = np.random.default_rng(seed)
    out = vec.reset()
    outs = [_copy(out)]
    for _ in range(num_steps):
        actions = _random_actions(rng, out.legal_actions)
        if split:
            vec.step_async(actions, out.is_last)
            out = vec.step_wait()
        else:
            out = vec.step(actions, out.is_last)
        outs.append(_copy(out))
    return outs


def _run_singles(make_env, num_envs: int, base_seed: int, num_steps: int, seed: int) -> list[StepOutput]:
    """The same play with B separate envs seeded base_seed + i, stacked by hand."""
    envs = [make_env() for _ in range(num_envs)]
    rng = np.random.default_rng(seed)
    outs = [[env.reset(seed=base_seed + i) for i, env in enumerate(envs)]]
    for _ in range(num_steps):
        legal = np.stack([o.legal_actions for o in outs[-1]])
        actions = _random_actions(rng, legal)
        outs.append([env.step(a, o.is_last) for env, a, o in zip(envs, actions, outs[-1])])
    return [StepOutput(*(np.stack(f) for f in zip(*step))) for step in outs]


def _assert_same(a: list[StepOutput], b: list[StepOutput]) -> None:
    assert len(a) == len(b)
    for t, (x, y) in enumerate(zip(a, b)):
        for field in StepOutput._fields:
            xa, ya = np.asarray(getattr(x, field)), np.asarray(getattr(y, field))
            assert xa.dtype == ya.dtype, (t, field, xa.dtype, ya.dtype)
            np.testing.assert_array_equal(xa, ya, err_msg=f"step {t}, field {field}")


@pytest.mark.parametrize("num_processes", [1, 2])
@pytest.mark.slow
def test_breakout_batch_equals_single_envs(num_processes):
    """B = 5 over P processes (a 3 + 2 split for P = 2) gives exactly the B single envs' outputs."""
    with VectorEnv(BREAKOUT, num_envs=5, num_processes=num_processes, seed=10) as vec:
        assert vec.spec == minatar.make("breakout").spec
        batched = _run_batched(vec, num_steps=120, seed=0)
    expected = _run_singles(BREAKOUT, 5, base_seed=10, num_steps=120, seed=0)
    _assert_same(batched, expected)
    for out in batched:
        conformance.check_step_output(out, vec.spec, batch=(5,))
    # Random breakout episodes are short: the run crossed episode ends in every slot.
    assert np.all(np.stack([o.is_last for o in batched]).any(axis=0))


def test_cartpole_three_processes_equal_one():
    with VectorEnv(CARTPOLE, num_envs=4, num_processes=1, seed=3) as one:
        a = _run_batched(one, num_steps=60, seed=1)
    with VectorEnv(CARTPOLE, num_envs=4, num_processes=3, seed=3) as three:
        b = _run_batched(three, num_steps=60, seed=1, split=True)
        with pytest.raises(RuntimeError, match="step_wait called without step_async"):
            three.step_wait()
    _assert_same(a, b)
    assert a[0].obs.shape == (4, 1, 1, 4) and a[0].obs.dtype == np.float32


@pytest.mark.parametrize("num_processes", [1, 2])
def test_errors_surface_with_type_and_message(num_processes):
    with VectorEnv(CARTPOLE, num_envs=4, num_processes=num_processes, seed=0) as vec:
        view = vec.reset()  # views of the batch buffers: they show the state after the failed step
        before = _copy(view)
        actions = np.array([1, 2, 1, DUMMY_ACTION])
        with pytest.raises(IllegalActionError) as info:
            vec.step(actions, np.zeros(4, bool))
        assert str(info.value) == "action 0 is illegal in gym:CartPole-v1; legal: [1, 2]"
        after = _copy(view)
        # The failing slot keeps its output; the others stepped.
        np.testing.assert_array_equal(after.obs[3], before.obs[3])
        assert after.is_first.tolist() == [False, False, False, True]
        # reset() brings the batch back in step.
        out = vec.reset(seed=0)
        np.testing.assert_array_equal(out.obs, before.obs)
        out = vec.step(np.ones(4, int), out.is_last)
        assert not out.is_first.any()


def test_errors_while_making_envs_in_workers():
    with pytest.raises(UnknownGameError, match="unknown Gymnasium id 'CartPol-v1'; did you mean gym:CartPole-v1"):
        VectorEnv(functools.partial(gym_bridge.make_gym, "CartPol-v1"), num_envs=2, num_processes=2)


def test_reset_semantics_per_slot():
    with VectorEnv(BREAKOUT, num_envs=3, num_processes=1, seed=0) as vec:
        first = _copy(vec.reset())
        assert first.is_first.all() and not first.is_last.any()
        # Forcing is_last in slot 1 resets that slot only (its action is ignored).
        out = _copy(vec.step(np.array([1, DUMMY_ACTION, 2]), np.array([False, True, False])))
        assert out.is_first.tolist() == [False, True, False]
        # reset(seed) replays the first reset exactly; reset() later does not reseed.
        _assert_same([_copy(vec.reset(seed=0))], [first])
        seeds_again = [_copy(vec.reset()) for _ in range(6)]
        assert any(not np.array_equal(o.obs, first.obs) for o in seeds_again)
        # reset(seed=s) gives env i the seed s + i.
        _assert_same([_copy(vec.reset(seed=7))], _run_singles(BREAKOUT, 3, base_seed=7, num_steps=0, seed=0))


def test_outputs_are_read_only_views_overwritten_by_the_next_step():
    with VectorEnv(CARTPOLE, num_envs=2, num_processes=1, seed=0) as vec:
        out = vec.reset()
        kept = out.obs.copy()
        assert not out.obs.flags.writeable and not out.legal_actions.flags.writeable
        nxt = vec.step(np.ones(2, int), out.is_last)
        assert np.shares_memory(out.obs, nxt.obs)
        assert not np.array_equal(out.obs, kept)  # documented: copy what you keep


def test_argument_checks():
    with pytest.raises(MooziError, match="num_processes must be between 1 and num_envs"):
        VectorEnv(CARTPOLE, num_envs=2, num_processes=3)
    with pytest.raises(TypeError, match="make_env must be picklable"):
        VectorEnv(lambda: gym_bridge.make_gym("CartPole-v1"), num_envs=2, num_processes=2)
    with VectorEnv(CARTPOLE, num_envs=2) as vec:
        with pytest.raises(RuntimeError, match="reset"):
            vec.step(np.ones(2, int), np.zeros(2, bool))
        out = vec.reset()
        with pytest.raises(ValueError, match=r"shape \(2,\)"):
            vec.step(np.ones(3, int), out.is_last)
        with pytest.raises(TypeError):
            vec.step(np.ones(2, float), out.is_last)
    with pytest.raises(RuntimeError, match="closed"):
        vec.reset()


def _shm_path(vec: VectorEnv) -> pathlib.Path:
    return pathlib.Path("/dev/shm") / vec._workers.memory.name.lstrip("/")


_LINUX = pathlib.Path("/dev/shm").is_dir() and pathlib.Path("/proc/self/maps").exists()


@pytest.mark.skipif(not _LINUX, reason="reads /proc and /dev/shm")
def test_workers_skip_jax_and_close_cleans_up():
    vec = VectorEnv(CARTPOLE, num_envs=2, num_processes=2, seed=0)
    processes = list(vec._workers.processes)
    shm = _shm_path(vec)
    assert shm.exists() and all(p.is_alive() for p in processes)
    for p in processes:
        maps = pathlib.Path(f"/proc/{p.pid}/maps").read_text()
        assert "jaxlib" not in maps and "xla_extension" not in maps, "a worker loaded JAX"
    out = vec.reset()
    vec.step(np.ones(2, int), out.is_last)
    vec.close()
    assert vec.closed
    assert [p.exitcode for p in processes] == [0, 0]  # closed cleanly, not terminated
    assert not shm.exists()
    vec.close()  # idempotent


@pytest.mark.skipif(not pathlib.Path("/dev/shm").is_dir(), reason="POSIX shared memory")
def test_garbage_collection_cleans_up_even_with_views_alive():
    vec = VectorEnv(CARTPOLE, num_envs=2, num_processes=2, seed=0)
    out = vec.reset()  # a view into the shared block, still alive after the env is gone
    processes = list(vec._workers.processes)
    shm = _shm_path(vec)
    del vec
    gc.collect()
    for p in processes:
        p.join(timeout=10)
    assert [p.exitcode for p in processes] == [0, 0]
    assert not shm.exists()
    assert out.obs.shape == (2, 1, 1, 4) and np.isfinite(out.obs).all()  # the view stays readable


# ------------------------------------- the OpenSpiel fast path (step_into/reset_into)
class _PlainOpenSpiel:
    """An OpenSpiel env without the fast path: VectorEnv falls back to step()/reset()."""

    def __init__(self, game: str):
        self._env = openspiel.make(game)
        self.spec = self._env.spec
        self.reset, self.step, self.close = self._env.reset, self._env.step, self._env.close
        self.get_state, self.set_state = self._env.get_state, self._env.set_state


def _assert_bitwise(a: list[StepOutput], b: list[StepOutput]) -> None:
    _assert_same(a, b)
    for t, (x, y) in enumerate(zip(a, b)):
        for field in StepOutput._fields:
            assert np.asarray(getattr(x, field)).tobytes() == np.asarray(getattr(y, field)).tobytes(), (t, field)


@pytest.mark.parametrize("game", ["tic_tac_toe", "connect_four", "pig"])
@pytest.mark.parametrize("num_processes", [1, 2])
def test_openspiel_fast_path_equals_single_envs(game, num_processes):
    make_env = functools.partial(openspiel.make, game)
    with VectorEnv(make_env, num_envs=5, num_processes=num_processes, seed=10) as vec:
        if num_processes == 1:
            assert vec._local.fast
        batched = _run_batched(vec, num_steps=150, seed=0)
    with VectorEnv(functools.partial(_PlainOpenSpiel, game), num_envs=5, num_processes=1, seed=10) as vec:
        assert not vec._local.fast
        plain = _run_batched(vec, num_steps=150, seed=0)
    expected = _run_singles(make_env, 5, base_seed=10, num_steps=150, seed=0)  # env.step, one env at a time
    _assert_bitwise(batched, expected)
    _assert_bitwise(plain, expected)
    assert np.stack([o.is_last for o in batched]).sum() >= 3  # episode ends were crossed


@pytest.mark.parametrize(
    "make_env", [functools.partial(openspiel.make, "tic_tac_toe"), functools.partial(_PlainOpenSpiel, "tic_tac_toe")]
)
def test_openspiel_errors_are_the_same_on_both_paths(make_env):
    with VectorEnv(make_env, num_envs=3, num_processes=1, seed=0) as vec:
        view = vec.reset()
        out = _copy(vec.step(np.array([5, 5, 5]), view.is_last))  # x takes the centre everywhere
        with pytest.raises(IllegalActionError) as info:
            vec.step(np.array([1, 5, DUMMY_ACTION]), out.is_last)
        assert str(info.value) == "action 5 is illegal in openspiel:tic_tac_toe; legal: [1, 2, 3, 4, 6, 7, 8, 9]"
        after = _copy(view)
        for field in StepOutput._fields:  # slots 1 and 2 failed and keep their outputs; slot 0 stepped
            np.testing.assert_array_equal(getattr(after, field)[1:], getattr(out, field)[1:])
        assert after.to_play.tolist() == [0, 1, 1] and not after.legal_actions[0, 1]
        assert vec.reset(seed=0).is_first.all()


def test_openspiel_snapshots_of_the_fast_path_resume_exactly():
    """VectorEnv.get_state reads the last outputs out of the batch rows; set_state continues from them."""
    make_env = functools.partial(openspiel.make, "pig")
    rng = np.random.default_rng(5)
    with VectorEnv(make_env, num_envs=4, seed=1) as vec, VectorEnv(
        functools.partial(_PlainOpenSpiel, "pig"), num_envs=4, seed=1
    ) as plain:
        out, ref = vec.reset(), plain.reset()
        for _ in range(30):
            actions = _random_actions(rng, out.legal_actions)
            out, ref = vec.step(actions, out.is_last), plain.step(actions, ref.is_last)
        snapshot = vec.get_state()
        expected = plain.get_state()
        assert sorted(snapshot) == sorted(expected)
        for key in snapshot:
            assert snapshot[key].dtype == expected[key].dtype and snapshot[key].tobytes() == expected[key].tobytes()
        kept = _copy(out)
        actions = _random_actions(rng, kept.legal_actions)
        later = _copy(vec.step(actions, kept.is_last))
    with VectorEnv(make_env, num_envs=4, seed=99) as resumed:
        resumed.reset()
        resumed.set_state(snapshot)
        _assert_bitwise([_copy(resumed.step(actions, kept.is_last))], [later])
