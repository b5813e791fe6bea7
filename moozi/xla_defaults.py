"""XLA:CPU settings moozi chooses before JAX starts its CPU backend (measured: docs/performance.md).

XLA:CPU hands parts of a program to the YNNPACK library ("library fusions"). For the board networks
(3x3 convolutions over 6x7 and 9x9 boards, layer norm between them) the convolution fusions ran
1.5x slower in inference and 1.6-1.8x slower in the learner's gradient than XLA's own convolution;
fusing only single matrix products ("individual_dot") kept the MLP networks (MinAtar, 2048) as fast
as before. So moozi asks for that one fusion type, through XLA_FLAGS, which XLA reads once, when the
backend starts: `import moozi` (which every moozi entry point does first) sets it, and it has no
effect on a backend already running.

It is left alone where the user's XLA_FLAGS already names the setting, where MOOZI_XLA_DEFAULTS=0,
and where jaxlib is older than the versions measured (an XLA that does not know a flag in XLA_FLAGS
refuses to start). The flag only concerns the CPU backend; GPU programs are unaffected.
"""

from __future__ import annotations

import os
import re
from importlib import metadata

YNN_FUSION_FLAG = "xla_cpu_experimental_ynn_fusion_type"
YNN_FUSION_TYPES = "individual_dot"
# The first jaxlib measured with the flag (0.10.2); older ones may not know it.
MIN_JAXLIB = (0, 10)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def xla_flags_with_defaults(xla_flags: str, jaxlib_version: str | None, opt_out: bool = False) -> str:
    """The XLA_FLAGS moozi runs with: `xla_flags` plus the library-fusion setting where it applies."""
    if opt_out or YNN_FUSION_FLAG in xla_flags or jaxlib_version is None:
        return xla_flags
    if _version(jaxlib_version)[:2] < MIN_JAXLIB:
        return xla_flags
    return f"{xla_flags} --{YNN_FUSION_FLAG}={YNN_FUSION_TYPES}".strip()


def apply_xla_defaults(environ=os.environ) -> None:
    """Sets XLA_FLAGS in `environ` (the process's, by default) as `xla_flags_with_defaults` says."""
    try:
        jaxlib_version = metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        jaxlib_version = None
    flags = xla_flags_with_defaults(environ.get("XLA_FLAGS", ""), jaxlib_version,
                                    opt_out=environ.get("MOOZI_XLA_DEFAULTS", "1") == "0")
    if flags:
        environ["XLA_FLAGS"] = flags
