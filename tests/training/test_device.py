"""backend.device: the device a run computes on, chosen when the run starts, printed and recorded."""

import json
import threading

import jax
import jax.numpy as jnp
import pytest

from moozi.cli import main
from moozi.config import BackendConfig, build_config
from moozi.config.overrides import ConfigError
from moozi.training.driver import Driver
from moozi.training.device import available_devices, select_device
from tests.helpers.tiny import tiny_config

CPU = str(jax.devices("cpu")[0])


def _device_of_an_array_made_on_another_thread():
    made = []
    thread = threading.Thread(target=lambda: made.append(jnp.zeros(3)))  # the inline backend's roles are threads
    thread.start()
    thread.join()
    return next(iter(made[0].devices()))


@pytest.fixture
def restore_default_device():
    yield
    jax.config.update("jax_default_device", None)


def test_cpu_becomes_every_threads_default_and_auto_undoes_it(restore_default_device):
    assert select_device(BackendConfig(device="cpu")) == f"{CPU} (cpu)"
    assert jax.config.jax_default_device == jax.devices("cpu")[0]
    assert _device_of_an_array_made_on_another_thread() == jax.devices("cpu")[0]
    default = jax.devices()[0]
    assert select_device(BackendConfig()) == f"{default} ({default.device_kind})"
    assert jax.config.jax_default_device is None
    assert _device_of_an_array_made_on_another_thread() == default


@pytest.mark.skipif(any(p != "cpu" for p in available_devices()), reason="this machine has an accelerator")
def test_a_platform_without_devices_is_refused_naming_the_key_and_the_devices_there_are(tmp_path):
    message = rf"bad value 'gpu' for backend\.device: this machine has no gpu device \(devices here: cpu: {CPU}\)"
    with pytest.raises(ConfigError, match=message):
        select_device(BackendConfig(device="gpu"))
    # The driver refuses before the run directory is made, for either loop.
    with pytest.raises(ConfigError, match=message):
        Driver(tiny_config(**{"backend.device": "gpu"}), tmp_path / "muzero", progress=False)
    with pytest.raises(ConfigError, match=r"no tpu device"):
        Driver(build_config("gymnax:CartPole-v1", overrides={"agent": "ppo", "backend.device": "tpu"}),
               tmp_path / "ppo", progress=False)
    assert not (tmp_path / "muzero").exists() and not (tmp_path / "ppo").exists()


def test_bad_values_and_ray_are_refused_by_the_config():
    with pytest.raises(ConfigError, match=r"bad value 'npu' for backend\.device: expected one of 'auto', 'cpu', 'gpu', 'tpu'"):
        build_config("tic_tac_toe", overrides={"backend.device": "npu"})
    with pytest.raises(ConfigError, match=r"backend\.device='cpu' needs backend\.kind=inline"):
        build_config("tic_tac_toe", overrides={"backend.device": "cpu", "backend.kind": "ray"})
    assert select_device(BackendConfig(kind="ray")).startswith("per role, as Ray places it")


@pytest.mark.slow
def test_train_prints_and_records_the_device(tmp_path, capsys, restore_default_device):
    run_dir = tmp_path / "run"
    code = main(["train", "gymnax:CartPole-v1", "--run-dir", str(run_dir), "--max-env-steps", "32", "--quiet", "--json",
                 "--set", "agent=ppo", "--set", "backend.device=cpu", "--set", "ppo.num_envs=4",
                 "--set", "ppo.rollout_steps=8", "--set", "ppo.mlp_hidden_sizes=8", "--set", "ppo.num_minibatches=1",
                 "--set", "train.test_every_updates=0"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # One line, before the compiling: the device and where the run goes.
    assert f"device: {CPU} (cpu); run: {run_dir}" in captured.err.splitlines()
    assert json.loads(captured.out.strip().splitlines()[-1])["device"] == f"{CPU} (cpu)"
    assert json.loads((run_dir / "summary.json").read_text())["device"] == f"{CPU} (cpu)"
    assert json.loads((run_dir / "config.json").read_text())["backend"]["device"] == "cpu"
