"""The JAX device a run computes on (`backend.device`), chosen and checked when the run starts.

Every jitted program of a run (the learner's update, acting, the Anakin loops) runs on JAX's default
device: nothing in moozi places arrays on a device by name. So choosing a device is making it the
default, once, before any role builds its parameters: `jax_default_device` is a process-wide setting
(unlike the `jax.default_device` context manager, which holds for one thread only and so would miss
the inline backend's role threads). Host-side parts (replay storage, host envs) are numpy and stay on
the CPU whatever the device (docs/gpu.md says where data crosses).
"""

from __future__ import annotations

import jax

from moozi.config import BackendConfig
from moozi.config.overrides import ConfigError

PLATFORMS = ("cpu", "gpu", "tpu")


def available_devices() -> dict[str, list[str]]:
    """Platform -> its devices, for the platforms this process's JAX can start."""
    found = {}
    for platform in PLATFORMS:
        try:
            found[platform] = [str(d) for d in jax.devices(platform)]
        except RuntimeError:  # JAX's answer for a platform with no plugin or no device
            continue
    return found


def select_device(backend: BackendConfig) -> str:
    """Makes `backend.device`'s device this process's default and returns it in words, e.g.
    "cuda:0 (NVIDIA H100 80GB HBM3)". Raises ConfigError naming the key and the devices there are
    when the asked platform has none. With Ray the roles are other processes: nothing is set here."""
    if backend.kind == "ray":
        return (f"per role, as Ray places it (backend.learner_gpus={backend.learner_gpus}, "
                f"backend.rollout_worker_gpus={backend.rollout_worker_gpus})")
    if backend.device == "auto":
        jax.config.update("jax_default_device", None)  # undo an earlier run's choice in this process
        device = jax.devices()[0]
    else:
        try:
            device = jax.devices(backend.device)[0]
        except RuntimeError:
            there = "; ".join(f"{p}: {', '.join(ds)}" for p, ds in available_devices().items()) or "none"
            raise ConfigError(
                f"bad value {backend.device!r} for backend.device: this machine has no {backend.device} device "
                f"(devices here: {there}); use backend.device=auto or one of those platforms"
            ) from None
        jax.config.update("jax_default_device", device)
    return f"{device} ({device.device_kind})"
