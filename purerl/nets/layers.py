"""The layers purerl's networks are built of: orthogonal initialization (drawn at once on CPU),
dense towers (`MLP`, batched for separate policy and value towers), convolutions, the
serialized representation (`Tokenizer`), and `ActorCriticBase`, the torso and head settings
that the feed-forward and the recurrent actor-critic share."""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Any, Callable, Iterator, Optional, Sequence, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from flax.core import meta

ACTIVATION_FNS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "swish": nn.swish,
    "silu": nn.silu,
    "elu": nn.elu,
    "leaky_relu": nn.leaky_relu,
    "sigmoid": nn.sigmoid,
    "softplus": nn.softplus,
}


class Orthogonal(struct.PyTreeNode, meta.AxisMetadata):
    """A kernel `[*towers, in, out]` that `orthogonal` leaves for `init_params`' one draw to fill:
    zeros of its shape until then, and its gain (`scale`). Each of its `batch_ndim` leading axes
    indexes a separate kernel of its own `[in, out]`; `scale` and `columns` may give one entry
    per kernel. `columns`: only that many leading columns of a kernel are drawn (an orthogonal
    `[in, columns]` kernel), the rest stay zero (default: all)."""

    value: jax.Array
    scale: Any = struct.field(pytree_node=False)
    batch_ndim: int = struct.field(pytree_node=False, default=0)
    columns: Any = struct.field(pytree_node=False, default=None)

    def matrices(self) -> list:
        """`(gain, drawn columns)` of each `[in, out]` kernel, in order.

        Returns:
            `prod(value.shape[:batch_ndim])` pairs `(gain, columns)`, a float and an int.
        """
        num = math.prod(self.value.shape[:self.batch_ndim])
        columns = self.value.shape[-1] if self.columns is None else self.columns
        return list(zip(np.broadcast_to(self.scale, num).tolist(),
                        np.broadcast_to(columns, num).tolist()))

    @property
    def normal_size(self) -> int:
        """How many normal numbers its kernels are drawn from: `in` times the drawn columns."""
        return self.value.shape[-2] * sum(columns for _, columns in self.matrices())

    def assemble(self, kernels: Sequence[jax.Array]) -> jax.Array:
        """The whole kernel `[*towers, in, out]` of one `[in, columns]` matrix per kernel (in
        `matrices()`' order), each zero-padded to `out` columns.

        Args:
            kernels: one `[in, columns]` array per kernel.

        Returns:
            `[*towers, in, out]`, the box's `value` shape.
        """
        cols = self.value.shape[-1]
        return jnp.stack([jnp.pad(kernel, ((0, 0), (0, cols - kernel.shape[1])))
                          for kernel in kernels]).reshape(self.value.shape)

    def unbox(self) -> jax.Array:
        """flax's `AxisMetadata.unbox`: the kernel.

        Returns:
            `value`.
        """
        return self.value

    def replace_boxed(self, val) -> "Orthogonal":
        """flax's `AxisMetadata.replace_boxed`: the box around another value.

        Args:
            val: the new value.

        Returns:
            The new `Orthogonal`.
        """
        return self.replace(value=val)

    def add_axis(self, index, params) -> "Orthogonal":
        """flax's `AxisMetadata.add_axis`: nothing to record.

        Args:
            index: the axis added (unused).
            params: the transform's params (unused).

        Returns:
            The box itself.
        """
        return self

    def remove_axis(self, index, params) -> "Orthogonal":
        """flax's `AxisMetadata.remove_axis`: nothing to record.

        Args:
            index: the axis removed (unused).
            params: the transform's params (unused).

        Returns:
            The box itself.
        """
        return self


# True only while `init_params` runs its one-draw path's `module.init`.
_LEAVE_KERNELS_IN_BOXES = contextvars.ContextVar("purerl_leave_kernels_in_boxes", default=False)


@contextlib.contextmanager
def _kernels_left_in_boxes() -> Iterator[None]:
    token = _LEAVE_KERNELS_IN_BOXES.set(True)
    try:
        yield
    finally:
        _LEAVE_KERNELS_IN_BOXES.reset(token)


def orthogonal(scale, batch_ndim: int = 0, columns=None) -> Callable:
    """A flax kernel initializer: orthogonal `[*towers, in, out]` kernels of gain `scale` (as for
    `Orthogonal`: `batch_ndim` leading axes of separate kernels, a gain and a number of drawn
    columns per kernel), each drawn by `jax.nn.initializers.orthogonal` from a key of its own.
    Inside `init_params`' one-draw path it gives an `Orthogonal` box of zeros instead.

    Args:
        scale: the gain, or one per kernel.
        batch_ndim: leading axes of separate kernels.
        columns: the drawn columns, one count per kernel; None: all.

    Returns:
        `init(key, shape, dtype=float32)`, the kernel `[*towers, in, out]` (or its box).
    """

    def init(key: jax.Array, shape, dtype=jnp.float32):
        box = Orthogonal(jnp.zeros(shape, dtype), scale, batch_ndim, columns)
        if _LEAVE_KERNELS_IN_BOXES.get():
            return box
        rows = shape[-2]
        keys = jax.random.split(key, len(box.matrices()))
        return box.assemble([jax.nn.initializers.orthogonal(gain)(k, (rows, cols), dtype)
                             for k, (gain, cols) in zip(keys, box.matrices())])

    return init


def orthogonal_from_normal(normal: jax.Array, scale: float) -> jax.Array:
    """`jax.nn.initializers.orthogonal(scale)` for an `[in, out]` kernel, of a given normal
    sample of the kernel's size: the Q of a QR, its columns' signs those of R's diagonal.

    Args:
        normal: standard normal `[in, out]`.
        scale: the gain.

    Returns:
        `[in, out]`, orthonormal columns (rows when `in < out`) times `scale`.
    """
    rows, cols = normal.shape
    q, r = jnp.linalg.qr(normal.reshape(max(rows, cols), min(rows, cols)))
    q = q * jnp.sign(jnp.diagonal(r))
    return scale * (q.T if rows < cols else q)


def _is_box(x) -> bool:
    return isinstance(x, Orthogonal)


def kernel_normal_size(module: nn.Module, *example_args, one_draw: bool = False) -> int:
    """How many standard normal numbers `init_params` draws for `module`'s orthogonal kernels
    (a static count, from the shapes alone); 0 on the plain path (`one_draw` as there).

    Args:
        module: the flax module.
        *example_args: its example inputs, as `init_params` takes them.
        one_draw: the one-draw path (`ExecutionPlan.one_draw_init`).

    Returns:
        The count.
    """
    if not one_draw:
        return 0
    with _kernels_left_in_boxes():
        variables = jax.eval_shape(lambda: module.init(jax.random.key(0), *example_args))
    return sum(leaf.normal_size for leaf in jax.tree.leaves(variables, is_leaf=_is_box)
               if _is_box(leaf))


def init_params(module: nn.Module, key: jax.Array, *example_args,
                normal: Optional[jax.Array] = None, one_draw: bool = False) -> Any:
    """`module.init(key, *example_args)`: the same tree, its `orthogonal` kernels of the same
    distribution; with `one_draw` (`ExecutionPlan.one_draw_init`) all drawn at once.

    The one-draw path: `module.init` leaves each kernel in an `Orthogonal` box; one normal
    sample of all the kernels' sizes (`normal [kernel_normal_size(...)]`, drawn from `key`
    when not given) fills them, one QR per `[in, out]` matrix. flax's own init draws each
    kernel from a key of its own, and on CPU every draw and key derivation is a kernel for XLA
    to compile (the init was a third of the training program's compile time; this saved about
    1.2 s). Each QR runs unbatched: on several CPU devices a batched LAPACK QR waits for pool
    threads that are all busy (a hang seen with 2 forced devices on 2 cores). The plain path is
    `module.init` itself; it takes no `normal` (`kernel_normal_size` is 0 there).

    Args:
        module: the flax module.
        key: a PRNG key.
        *example_args: its example inputs.
        normal: float32 `[kernel_normal_size(...)]` to fill the kernels from (one-draw path
            only); None: drawn from `key`.
        one_draw: take the one-draw path.

    Returns:
        The variables, `{"params": ...}` as `module.init` gives them.

    Raises:
        ValueError: a non-empty `normal` on the plain path.
    """
    if not one_draw:
        if normal is not None and normal.size:
            raise ValueError(f"init_params' plain path draws no normal sample; got {normal.size}")
        return module.init(key, *example_args)
    # flax folds each parameter's name into `key` before drawing: the same key serves both.
    with _kernels_left_in_boxes():
        variables = module.init(key, *example_args)
    leaves, treedef = jax.tree.flatten(variables, is_leaf=_is_box)
    boxes = [leaf for leaf in leaves if _is_box(leaf)]
    sizes = [box.normal_size for box in boxes]
    if normal is None:
        normal = jax.random.normal(key, (sum(sizes),))
    normals = jnp.split(normal, np.cumsum(sizes)[:-1])
    drawn = iter(_draw_kernel(box, normal) for box, normal in zip(boxes, normals))
    return jax.tree.unflatten(treedef, [next(drawn) if _is_box(leaf) else leaf
                                        for leaf in leaves])


def _draw_kernel(box: Orthogonal, normal: jax.Array) -> jax.Array:
    """`box`'s kernel from `normal [box.normal_size]`, its matrices' samples one after another."""
    rows = box.value.shape[-2]
    kernels, start = [], 0
    for scale, columns in box.matrices():
        kernels.append(orthogonal_from_normal(
            normal[start:start + rows * columns].reshape(rows, columns), scale))
        start += rows * columns
    return box.assemble(kernels)


def dense(features: int, scale: float) -> nn.Dense:
    """A dense layer of `features` outputs, its kernel orthogonal of gain `scale`, bias zero.

    Args:
        features: the outputs.
        scale: the kernel's gain.

    Returns:
        The `nn.Dense`.
    """
    return nn.Dense(features, kernel_init=orthogonal(scale), bias_init=nn.initializers.zeros)


# A flax collection of one tower's kernels of a batched MLP, sliced out of its `[K, in, out]`
# kernels ahead of a loop (`ActorCritic.step_variables`): `MLP(x, tower)` reads them instead of
# slicing the kernels itself, which inside a loop (the rollout's scan) XLA does at every step.
TOWER_KERNELS = "tower_kernels"


class MLP(nn.Module):
    """Dense layers with orthogonal init (gain sqrt 2): `[N, D] -> [N, hidden_sizes[-1]]`.

    With `num_towers = K > 1`, K separate MLPs of the same sizes over the same input, run as one
    batched MLP: `[N, D] -> [K, N, hidden_sizes[-1]]`, kernels `[K, in, out]`. Each tower is
    initialized and trained as its own MLP would be; batching halves the kernel calls of two
    towers, which is most of their cost at small batch sizes. `head_sizes` (one per tower)
    adds a linear head to each tower, batched too: `[K, N, max(head_sizes)]`, tower k's head
    orthogonal with gain `head_scales[k]` in its first `head_sizes[k]` columns, the other
    columns zero (their outputs are not to be used: they get no gradient and stay zero).
    """

    hidden_sizes: Sequence[int]
    activation: str = "tanh"
    num_towers: int = 1
    head_sizes: Sequence[int] = ()
    head_scales: Sequence[float] = ()
    towers_apart: bool = False  # all towers run as K matmuls per layer, not one batched one

    @nn.compact
    def __call__(self, x: jax.Array, tower: Optional[int] = None) -> jax.Array:
        """`tower`: run only that tower of a batched MLP, `[N, D] -> [N, hidden_sizes[-1]]`
        (or the head's width).

        Args:
            x: `[N, D]`.
            tower: the tower to run, or None for all of them.

        Returns:
            `[N, hidden_sizes[-1]]` with one tower; `[K, N, width]` for all K towers, width
                `max(head_sizes)` with heads.
        """
        act = ACTIVATION_FNS[self.activation]
        if self.num_towers == 1:
            for size in self.hidden_sizes:
                x = act(dense(size, np.sqrt(2.0))(x))
            return x
        if tower is None:
            x = jnp.broadcast_to(x, (self.num_towers, *x.shape))
        layers = [(f"_{i}", size, orthogonal(np.sqrt(2.0), batch_ndim=1), act)
                  for i, size in enumerate(self.hidden_sizes)]
        if self.head_sizes:
            layers.append(("_head", max(self.head_sizes),
                           orthogonal(tuple(self.head_scales), 1, tuple(self.head_sizes)),
                           lambda h: h))
        for suffix, size, kernel_init, layer_act in layers:
            kernel = self.param(f"kernel{suffix}", kernel_init,
                                (self.num_towers, x.shape[-1], size))
            bias = self.param(f"bias{suffix}", nn.initializers.zeros, (self.num_towers, 1, size))
            if tower is None and self.towers_apart:
                x = layer_act(jnp.stack([x[k] @ kernel[k] for k in range(self.num_towers)])
                              + bias)
            elif tower is None:
                x = layer_act(jnp.einsum("knd,kdh->knh", x, kernel) + bias)
            else:
                name = f"kernel{suffix}_{tower}"
                if self.has_variable(TOWER_KERNELS, name):  # sliced ahead: see step_variables
                    kernel = self.get_variable(TOWER_KERNELS, name)
                else:
                    kernel = kernel[tower]
                x = layer_act(x @ kernel + bias[tower])
        return x


def conv_output_size(size: int, kernel_size: int, strides: int, padding: str) -> int:
    """A convolution's output length along one spatial axis of length `size`: SAME
    `ceil(size / strides)`; VALID `floor((size - kernel_size) / strides) + 1`, below 1 when
    the input is smaller than the kernel.

    Args:
        size: the input's length.
        kernel_size: the kernel's length.
        strides: the stride.
        padding: "SAME" or "VALID".

    Returns:
        The output's length.
    """
    if padding == "SAME":
        return -(-size // strides)
    return (size - kernel_size) // strides + 1


def image_patches(x: jax.Array, kernel_size: int, strides: int, padding: str) -> jax.Array:
    """The k x k patches a convolution reads: `[N, H, W, C] -> [N, H', W', k * k * C]` (`H'`,
    `W'` as `conv_output_size`), each patch's features ordered as an HWIO kernel's rows.

    Built from shifted slices, so a convolution becomes one matmul. SAME pads as
    `lax.conv_general_dilated` does (the odd padding row or column at the end).

    Args:
        x: `[N, H, W, C]`.
        kernel_size: `k`.
        strides: the stride along H and W.
        padding: "SAME" or "VALID".

    Returns:
        `[N, H', W', k * k * C]`.
    """
    _, height, width, _ = x.shape
    out_h, out_w = (conv_output_size(size, kernel_size, strides, padding)
                    for size in (height, width))
    pad_h = max((out_h - 1) * strides + kernel_size - height, 0)
    pad_w = max((out_w - 1) * strides + kernel_size - width, 0)
    x = jnp.pad(x, ((0, 0), (pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2),
                    (0, 0)))
    return jnp.concatenate(
        [x[:, i:i + (out_h - 1) * strides + 1:strides, j:j + (out_w - 1) * strides + 1:strides]
         for i in range(kernel_size) for j in range(kernel_size)], axis=-1)


class Conv(nn.Module):
    """One convolution with orthogonal init (gain sqrt 2), zero bias:
    `[N, H, W, C] -> [N, H', W', features]` (`H'`, `W'` as `conv_output_size`).

    Its kernel is `[k * k * C, features]`, an HWIO kernel's rows flattened: it runs
    `lax.conv_general_dilated`, or with `patch_matmul` (`ExecutionPlan.conv_patch_matmul`) one
    matmul over `image_patches`, which runs faster on XLA:CPU than its convolutions and their
    gradients (Breakout-MinAtar's training program, 16 envs: about 3,900 env steps/s against
    820, the same compile time).
    """

    features: int
    kernel_size: int
    strides: int
    padding: str  # SAME or VALID
    patch_matmul: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        k, channels = self.kernel_size, x.shape[-1]
        kernel = self.param("kernel", orthogonal(np.sqrt(2.0)), (k * k * channels, self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        if self.patch_matmul:
            patches = image_patches(x, k, self.strides, self.padding)
            y = jax.lax.dot_general(patches, kernel, (((patches.ndim - 1,), (0,)), ((), ())))
        else:
            y = jax.lax.conv_general_dilated(
                x, kernel.reshape(k, k, channels, self.features), (self.strides, self.strides),
                self.padding, dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return y + bias


class CNN(nn.Module):
    """Convolutions (one `Conv` per entry of `channels`, `kernel_sizes`, `strides` and
    `padding`), flattened, then an MLP: `[N, H, W, C] -> [N, hidden_sizes[-1]]`."""

    channels: Sequence[int]
    kernel_sizes: Sequence[int]
    strides: Sequence[int]
    padding: Sequence[str]
    hidden_sizes: Sequence[int]
    activation: str = "relu"
    patch_matmul: bool = False  # each `Conv`'s

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATION_FNS[self.activation]
        layers = zip(self.channels, self.kernel_sizes, self.strides, self.padding, strict=True)
        for i, layer in enumerate(layers):
            # `Dense_i`: the names these layers had as `nn.Dense` over patches (the same tree).
            x = act(Conv(*layer, patch_matmul=self.patch_matmul, name=f"Dense_{i}")(x))
        return MLP(self.hidden_sizes, self.activation)(x.reshape(x.shape[0], -1))


UNBOUNDED = 1e30  # an observation bound at least this large counts as infinite


class Tokenizer(nn.Module):
    """The serialized representation (trax's `policy_and_value_vocab_size`): each observation
    dimension is quantized into `vocab_size` tokens and embedded. `[N, D] -> [N, D * embed_dim]`.

    Bounded dimensions are scaled by their bounds; unbounded ones are squashed with tanh first.
    """

    low: Sequence[float]  # [D] observation bounds, flattened
    high: Sequence[float]
    vocab_size: int
    embed_dim: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        low, high = np.asarray(self.low, np.float64), np.asarray(self.high, np.float64)
        bounded = (np.abs(low) < UNBOUNDED) & (np.abs(high) < UNBOUNDED) & (high > low)
        scale = np.where(bounded, high - low, 1.0)
        unit = jnp.where(bounded, (x - np.where(bounded, low, 0.0)) / scale,
                         0.5 * (jnp.tanh(x) + 1.0))
        tokens = jnp.clip(jnp.floor(unit * self.vocab_size), 0, self.vocab_size - 1)
        # One-hot times the table rather than a gather: its gradient is a matmul, not a scatter.
        one_hot = jax.nn.one_hot(tokens.astype(jnp.int32), self.vocab_size)  # [N, D, V]
        table = self.param("embedding", nn.initializers.normal(1.0),
                           (len(self.low), self.vocab_size, self.embed_dim))
        return jnp.einsum("ndv,dve->nde", one_hot, table).reshape(x.shape[0], -1)


class VariablesAsGiven:
    """`step_variables` of a network with nothing to prepare before a loop that acts at every
    step (`networks.ActorCritic` slices its batched towers' kernels)."""

    def step_variables(self, variables: Any) -> Any:
        """The variables as a loop that runs the policy at every step reads them: unchanged.

        Args:
            variables: the network's variables, `{"params": ...}`.

        Returns:
            `variables`.
        """
        return variables


class ActorCriticBase(VariablesAsGiven, nn.Module):
    """What every actor-critic shares: the settings of its torso and heads, the torso they
    describe, and the shaping of observations and policy outputs."""

    num_outputs: int
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared: bool = False
    gaussian: bool = False
    conv_channels: Sequence[int] = ()  # non-empty: a CNN torso over `[H, W, C]` observations
    conv_kernels: Sequence[int] = ()  # per convolution, as conv_channels: square kernel size
    conv_strides: Sequence[int] = ()  # per convolution: stride
    conv_padding: Sequence[str] = ()  # per convolution: SAME or VALID
    vocab_size: int = 0  # > 0: the serialized representation (needs obs_low / obs_high)
    embed_dim: int = 16
    obs_low: Sequence[float] = ()
    obs_high: Sequence[float] = ()
    conv_patch_matmul: bool = False  # `Conv.patch_matmul` of the CNN torso's convolutions
    towers_apart: bool = False  # `MLP.towers_apart` of separate towers over raw inputs
    # > 0: the observation vector's first this many entries are the value tower's input (a
    # central critic's state) and the rest the policy's; 0: both read the whole observation
    value_inputs: int = 0

    def _torso(self) -> nn.Module:
        if self.conv_channels:
            return CNN(self.conv_channels, self.conv_kernels, self.conv_strides, self.conv_padding,
                       self.hidden_sizes, self.activation, self.conv_patch_matmul)
        mlp = MLP(self.hidden_sizes, self.activation)
        if self.vocab_size:
            return nn.Sequential([Tokenizer(self.obs_low, self.obs_high, self.vocab_size,
                                            self.embed_dim), mlp])
        return mlp

    def _flat(self, obs: jax.Array, batch_ndim: int) -> jax.Array:
        """`[*batch, *obs_shape]` -> `[N, D]` (MLP) or `[N, H, W, C]` (CNN; `[H, W]` gains C=1)."""
        batch, obs_shape = obs.shape[:batch_ndim], obs.shape[batch_ndim:]
        if not self.conv_channels:
            return obs.reshape(math.prod(batch), -1).astype(jnp.float32)
        image = obs_shape if len(obs_shape) == 3 else (*obs_shape, 1)
        return obs.reshape(math.prod(batch), *image).astype(jnp.float32)

    def _tower_inputs(self, x: jax.Array, value: bool) -> jax.Array:
        """The policy's (`value` False) or the value's input of the flat observations
        `x [N, D]`: its part of them with `value_inputs`, else `x` whole."""
        if not self.value_inputs:
            return x
        return x[:, :self.value_inputs] if value else x[:, self.value_inputs:]

    def _policy_out(self, head: jax.Array, batch: Tuple[int, ...]) -> Any:
        head = head.reshape(*batch, -1)
        return (head, jnp.broadcast_to(self.log_std, head.shape)) if self.gaussian else head
