"""A 3x3 (any k x k) stride-1 convolution in two forms, for measuring which one a device runs faster.

- `lax_conv`: `lax.conv_general_dilated` in NHWC with HWIO weights, as Flax's `nn.Conv` calls it
  (moozi/core/network.py's trunk);
- `im2col_conv`: the same convolution as patches and one `dot_general`: the k*k shifted copies of
  the padded input are concatenated on the channel axis ([B, H, W, k*k*C_in], in (row, column,
  channel) order, the order of the HWIO weights reshaped to [k*k*C_in, C_out]) and multiplied by the
  weights in one matrix product of B*H*W rows.

Both are plain JAX functions (jittable, differentiable: the gradient of the im2col form is JAX's
own, through the slices and the product). Only the benches use them; the network's layers are
unchanged.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

DIMENSION_NUMBERS = ("NHWC", "HWIO", "NHWC")


def _pads(size: int, kernel: int, padding: str) -> tuple[int, int]:
    """(low, high) padding of one spatial axis at stride 1, as lax pads "SAME" and "VALID"."""
    if padding == "VALID":
        return 0, 0
    if padding != "SAME":
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    total = kernel - 1
    return total // 2, total - total // 2


def lax_conv(x, w, padding: str = "SAME", precision=None):
    """x [B, H, W, C_in], w [kh, kw, C_in, C_out] -> [B, H', W', C_out]: XLA's convolution."""
    return lax.conv_general_dilated(x, w, window_strides=(1, 1), padding=padding,
                                    dimension_numbers=DIMENSION_NUMBERS, precision=precision)


def im2col_patches(x, kernel_size: tuple[int, int], padding: str = "SAME"):
    """x [B, H, W, C] -> [B, H', W', kh*kw*C]: every output cell's kh x kw neighbourhood, flattened in
    (row, column, channel) order."""
    kh, kw = kernel_size
    (top, bottom), (left, right) = _pads(x.shape[1], kh, padding), _pads(x.shape[2], kw, padding)
    padded = jnp.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    out_h = padded.shape[1] - kh + 1
    out_w = padded.shape[2] - kw + 1
    columns = [padded[:, i:i + out_h, j:j + out_w, :] for i in range(kh) for j in range(kw)]
    return jnp.concatenate(columns, axis=-1)


def im2col_conv(x, w, padding: str = "SAME", precision=None):
    """The same convolution as `lax_conv`: `im2col_patches`, then one `dot_general` with the weights
    reshaped to [kh*kw*C_in, C_out]."""
    kh, kw, c_in, c_out = w.shape
    if x.shape[-1] != c_in:
        raise ValueError(f"x has {x.shape[-1]} channels, w expects {c_in}")
    patches = im2col_patches(x, (kh, kw), padding)
    return lax.dot_general(patches, w.reshape(kh * kw * c_in, c_out), (((3,), (0,)), ((), ())),
                           precision=precision)


def conv_flops(batch: int, height: int, width: int, c_in: int, c_out: int, kernel: tuple[int, int] = (3, 3)) -> float:
    """Multiply-adds x 2 of one stride-1 "SAME" convolution (the output has the input's H x W)."""
    return 2.0 * batch * height * width * kernel[0] * kernel[1] * c_in * c_out
