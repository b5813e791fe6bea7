"""`moozi train` in a child process that pauses at one chosen moment, so a test can `kill -9` it there.

    python tests/helpers/reliability_child.py MOMENT N [moozi train arguments...]

The child runs the real command line (`moozi.cli.main`); the only additions
are observation points. It prints one JSON object per line on stdout:

  {"event": "restored", ...}    after `--resume` loaded a checkpoint into the roles:
                                digests of what the roles now hold
  {"event": "checkpoint", ...}  after every complete checkpoint: its step and time
  {"event": "pause", ...}       at MOMENT: the time, the driver's counters, the time of
                                the last checkpoint (or of the loop's start) and how long
                                the iteration in progress has run; then it sleeps until killed.

MOMENT (N counts occurrences within this process, from 1):
  startup   inside Driver construction, once the parameter optimizer is built (N unused)
  restore   after --resume restored every role, before the first iteration (N unused)
  rollout   inside a training worker's rollout, after its N-th acting step
  update    inside a learner update, after its N-th train step (odd N: between the two
            train steps of one update call when train.updates_per_iteration = 2)
  write     inside the N-th checkpoint write, after train_state.msgpack was written to
            the temporary directory and before the arrays
  publish   inside the N-th checkpoint, after its directory was renamed into place and
            before LATEST names it
  after     right after the N-th checkpoint is complete
  none      never pauses
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time

import jax
import numpy as np

MOMENTS = ("startup", "restore", "rollout", "update", "write", "publish", "after", "none")


def digest_arrays(arrays) -> str:
    """sha256 over sorted names, dtypes, shapes and bytes: equal exactly when the arrays are equal."""
    h = hashlib.sha256()
    for key in sorted(arrays):
        value = np.ascontiguousarray(np.asarray(arrays[key]))
        h.update(f"{key}|{value.dtype.str}|{value.shape}|".encode())
        h.update(value.tobytes())
    return h.hexdigest()


def digest_tree(tree) -> str:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return digest_arrays({jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in leaves})


def _emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}, default=float), flush=True)


def main(moment: str, n: int, argv: list[str]) -> int:
    from moozi.runs import checkpoint as ckpt_mod
    from moozi import cli
    from moozi.training import driver as driver_mod
    from moozi.training import search_loop as search_loop_mod
    from moozi.training.roles import parameter_optimizer as po_mod
    from moozi.training.roles import self_play as rollout_mod

    if moment not in MOMENTS:
        raise SystemExit(f"unknown moment {moment!r}; one of {MOMENTS}")
    seen = {"driver": None, "loop_calls": [], "checkpoints": [], "counts": {}}

    def count(name: str) -> int:
        seen["counts"][name] = seen["counts"].get(name, 0) + 1
        return seen["counts"][name]

    def pause(**extra) -> None:
        now = time.monotonic()
        driver = seen["driver"]
        loop = seen["loop_calls"]
        last = seen["checkpoints"][-1] if seen["checkpoints"] else (loop[0] if loop else None)
        counters = dataclasses.asdict(driver.counters) if driver is not None and hasattr(driver, "counters") else None
        _emit("pause", moment=moment, t=now, counters=counters, last_checkpoint_t=last,
              iteration_seconds=now - loop[-1] if loop else 0.0, **extra)
        time.sleep(3600)

    # --- always on: find the driver, time its iterations and checkpoints, digest what a resume restored
    original_init = driver_mod.Driver.__init__

    def init(self, *args, **kwargs):
        seen["driver"] = self
        original_init(self, *args, **kwargs)

    driver_mod.Driver.__init__ = init

    original_should_stop = driver_mod.Driver._should_stop

    def should_stop(self, started):
        seen["loop_calls"].append(time.monotonic())
        return original_should_stop(self, started)

    driver_mod.Driver._should_stop = should_stop

    original_restore = driver_mod.Driver._restore

    def restore(self):
        step = original_restore(self)
        if step is not None:
            arrays = {f"replay/{k}": v for k, v in self.loop.replay.obj.state_dict().items()}
            for i, worker in enumerate(self.loop.workers):
                arrays.update({f"worker{i}/{k}": v for k, v in worker.obj.state_dict().items()})
            _emit("restored", step=step, counters=dataclasses.asdict(self.counters),
                  arrays=digest_arrays(arrays), train_state=digest_tree(self.loop.parameter_optimizer.obj.get_state()))
        if moment == "restore":
            pause()
        return step

    driver_mod.Driver._restore = restore

    original_save = driver_mod.save_checkpoint

    def save(*args, **kwargs):
        path = original_save(*args, **kwargs)
        seen["checkpoints"].append(time.monotonic())
        _emit("checkpoint", step=int(args[1]), t=seen["checkpoints"][-1])
        if moment == "after" and count("after") == n:
            pause(step=int(args[1]))
        return path

    driver_mod.save_checkpoint = save

    # --- the pause points
    if moment == "startup":
        class PausingOptimizer(po_mod.ParameterOptimizer):
            def __init__(self, config):
                super().__init__(config)
                pause()

        search_loop_mod.ParameterOptimizer = PausingOptimizer

    if moment == "rollout":
        original_worker_init = rollout_mod.TrainingRolloutWorker.__init__

        def worker_init(self, *args, **kwargs):
            original_worker_init(self, *args, **kwargs)
            act = self._act

            def counted_act(*a, **k):
                out = act(*a, **k)
                if count("rollout") == n:
                    pause()
                return out

            self._act = counted_act

        rollout_mod.TrainingRolloutWorker.__init__ = worker_init

    if moment == "update":
        original_po_init = po_mod.ParameterOptimizer.__init__

        def po_init(self, *args, **kwargs):
            original_po_init(self, *args, **kwargs)
            train_step = self._train_step

            def counted_step(*a, **k):
                out = train_step(*a, **k)
                if count("update") == n:
                    pause()
                return out

            self._train_step = counted_step

        po_mod.ParameterOptimizer.__init__ = po_init

    if moment == "write":
        original_write = ckpt_mod._write_file

        def write(path, data):
            original_write(path, data)
            # Resumable checkpoints only: best checkpoints (.tmp-best-*) are written between them.
            resumable = path.parent.name.startswith(".tmp-ckpt-")
            if path.name == ckpt_mod.TRAIN_STATE_FILE and resumable and count("write") == n:
                pause(tmp_dir=str(path.parent))

        ckpt_mod._write_file = write

    if moment == "publish":
        original_pointer = ckpt_mod._write_pointer

        def write_pointer(root, pointer, name):
            if pointer == ckpt_mod.LATEST_FILE and count("publish") == n:
                pause(published=name)
            original_pointer(root, pointer, name)

        ckpt_mod._write_pointer = write_pointer

    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3:]))
