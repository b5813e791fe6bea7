"""The XLA:CPU settings `import moozi` chooses (moozi/xla_defaults.py)."""

import os
import subprocess
import sys

from moozi.xla_defaults import YNN_FUSION_FLAG, apply_xla_defaults, xla_flags_with_defaults

FLAG = f"--{YNN_FUSION_FLAG}=individual_dot"


def test_the_library_fusion_setting_is_added_for_a_measured_jaxlib():
    assert xla_flags_with_defaults("", "0.10.2") == FLAG
    assert xla_flags_with_defaults("--xla_dump_to=/tmp/x", "0.11.0") == f"--xla_dump_to=/tmp/x {FLAG}"


def test_the_users_own_setting_an_opt_out_and_older_jaxlibs_are_left_alone():
    mine = f"--{YNN_FUSION_FLAG}="
    assert xla_flags_with_defaults(mine, "0.10.2") == mine
    assert xla_flags_with_defaults("--xla_dump_to=/tmp/x", "0.10.2", opt_out=True) == "--xla_dump_to=/tmp/x"
    # An XLA that does not know a flag in XLA_FLAGS refuses to start: older jaxlibs get nothing.
    assert xla_flags_with_defaults("", "0.4.30") == ""
    assert xla_flags_with_defaults("", "0.9.9") == ""
    assert xla_flags_with_defaults("", None) == ""


def test_apply_writes_the_environment_it_is_given():
    environ = {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}
    apply_xla_defaults(environ)
    assert environ["XLA_FLAGS"].startswith("--xla_dump_to=/tmp/x")
    opted_out = {"MOOZI_XLA_DEFAULTS": "0"}
    apply_xla_defaults(opted_out)
    assert "XLA_FLAGS" not in opted_out


def _fresh_python(code: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "MOOZI_XLA_DEFAULTS")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**environ, **env}, timeout=120)
    return result.stdout.strip()


def test_import_moozi_sets_the_flag_and_the_installed_xla_accepts_it():
    # XLA aborts on a flag it does not know, so a convolution compiled and run here shows the installed
    # jaxlib takes the setting; and moozi's own network compiles under it.
    code = (
        "import os, moozi, jax, jax.numpy as jnp\n"
        "from jax import lax\n"
        "x = jnp.ones((2, 9, 9, 4)); w = jnp.ones((3, 3, 4, 8))\n"
        "y = jax.jit(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), 'SAME',"
        " dimension_numbers=('NHWC', 'HWIO', 'NHWC')))(x, w)\n"
        "print(os.environ.get('XLA_FLAGS', ''), '|', float(y[0, 4, 4, 0]), float(y[0, 0, 0, 0]))\n"
    )
    flags, values = _fresh_python(code).split("|")
    if xla_flags_with_defaults("", _jaxlib_version()):
        assert FLAG in flags
    assert values.split() == ["36.0", "16.0"]  # 9 taps x 4 channels inside; 4 taps x 4 at a corner
    assert _fresh_python("import os, moozi; print(os.environ.get('XLA_FLAGS', ''))", MOOZI_XLA_DEFAULTS="0") == ""


def _jaxlib_version():
    from importlib import metadata

    return metadata.version("jaxlib")
