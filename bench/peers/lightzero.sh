#!/usr/bin/env bash
# Peer comparison (issue 5): LightZero 0.2.0's tic-tac-toe MuZero on CPU at 25 simulations.
#
#   bash bench/peers/lightzero.sh            # 8 minutes of training, self-play config
#   MINUTES=30 MODE=bot bash bench/peers/lightzero.sh
#
# Builds its own venv (bench/peers/.venv-lightzero, gitignored) on first use, runs
# LightZero's own train_muzero on its zoo config for MINUTES of wall time, and prints
# ONE JSON line: collect env steps/s, whole-run env steps/s, and the time to its best
# evaluation. Not part of CI. Env: MINUTES (8), MODE (sp | bot), SIMULATIONS (25),
# SEED (0), WORK_DIR (a new temporary directory), TORCH_WHEEL (a torch 2.13.0 wheel file).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv-lightzero"
PY="$VENV/bin/python"
MINUTES="${MINUTES:-8}"
MODE="${MODE:-sp}"
SIMULATIONS="${SIMULATIONS:-25}"
SEED="${SEED:-0}"
WORK_DIR="${WORK_DIR:-$(mktemp -d -t lightzero-XXXXXX)}"

install() {
  python3.11 -m venv "$VENV"
  # torch first, so nothing below pulls another build. A CPU wheel on disk is preferred.
  "$PY" -m pip install -q "${TORCH_WHEEL:-torch==2.13.0}"
  # `pip install lightzero` fails on DI-engine's setuptools<=66.1.1 pin: install both without
  # their dependency lists, then the runtime dependencies with torch held at 2.13.0.
  "$PY" -m pip install -q --no-deps lightzero==0.2.0 DI-engine==0.5.3
  local pins; pins="$(mktemp)"; echo "torch==2.13.0" > "$pins"
  "$PY" -m pip install -q -c "$pins" \
    "numpy>=1.24.1,<2" "gymnasium==0.28.0" "gym==0.25.1" "DI-treetensor>=0.4.0" "DI-toolkit>=0.1.0" \
    easydict pyyaml "tensorboardX>=2.2" "wandb<=0.19.0" matplotlib tabulate hickle cloudpickle enum-tools \
    trueskill "click>=7.0.0" "flask<=2.0.3" "werkzeug<=2.0.3" requests responses URLObject pynng sniffio redis \
    "mpire>=2.3.5" einops pympler minigrid xxhash line_profiler "yapf==0.29.0"
  rm -f "$pins"
}

if ! "$PY" -c "import lzero, ding, torch" >/dev/null 2>&1; then
  echo "building $VENV (once)" >&2
  install
fi

echo "LightZero tic-tac-toe MuZero ($MODE mode, $SIMULATIONS simulations) for $MINUTES min in $WORK_DIR" >&2
# One torch thread: on 2 cores the default thread pool is several times slower.
# timeout signals the whole process group (LightZero's env worker processes too).
OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 timeout -s INT -k 60 "${MINUTES}m" \
  "$PY" "$HERE/lightzero_run.py" train --work-dir "$WORK_DIR" --mode "$MODE" --simulations "$SIMULATIONS" \
  --seed "$SEED" > "$WORK_DIR/train.log" 2>&1 || status=$?
if [ "${status:-0}" -ne 0 ] && [ "${status:-0}" -ne 124 ]; then
  echo "LightZero exited with status $status; the end of $WORK_DIR/train.log:" >&2
  tail -n 20 "$WORK_DIR/train.log" >&2
fi
OMP_NUM_THREADS=1 "$PY" "$HERE/lightzero_run.py" report --work-dir "$WORK_DIR"
