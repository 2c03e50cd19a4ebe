"""Torsos and the actor-critic: a shared trunk with two heads, or two separate towers."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from flax.core import meta

from purerl.config import Config
from purerl.spaces import ActionSpec

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
    """A kernel `[*towers, in, out]` left for `init_params` to draw: zeros of its shape until
    then, and its gain (`scale`). Each of its `batch_ndim` leading axes indexes a separate
    kernel of its own `[in, out]`; `scale` and `columns` may give one entry per kernel.
    `columns`: only that many leading columns of a kernel are drawn (an orthogonal
    `[in, columns]` kernel), the rest stay zero (default: all)."""

    value: jax.Array
    scale: Any = struct.field(pytree_node=False)
    batch_ndim: int = struct.field(pytree_node=False, default=0)
    columns: Any = struct.field(pytree_node=False, default=None)

    def matrices(self) -> list:
        """`(gain, drawn columns)` of each `[in, out]` kernel, in order."""
        num = math.prod(self.value.shape[:self.batch_ndim])
        columns = self.value.shape[-1] if self.columns is None else self.columns
        return list(zip(np.broadcast_to(self.scale, num).tolist(),
                        np.broadcast_to(columns, num).tolist()))

    @property
    def normal_size(self) -> int:
        return self.value.shape[-2] * sum(columns for _, columns in self.matrices())

    def unbox(self) -> jax.Array:
        return self.value

    def replace_boxed(self, val) -> "Orthogonal":
        return self.replace(value=val)

    def add_axis(self, index, params) -> "Orthogonal":
        return self

    def remove_axis(self, index, params) -> "Orthogonal":
        return self


def orthogonal(scale, batch_ndim: int = 0, columns=None) -> Callable:
    """A kernel initializer for `init_params` to fill (the flax key it is given goes unused)."""
    return lambda key, shape, dtype=jnp.float32: Orthogonal(jnp.zeros(shape, dtype), scale,
                                                            batch_ndim, columns)


def _orthogonal_from_normal(normal: jax.Array, scale: float) -> jax.Array:
    """`jax.nn.initializers.orthogonal(scale)` for an `[in, out]` kernel, of a given normal
    sample of the kernel's size: the Q of a QR, its columns' signs those of R's diagonal."""
    rows, cols = normal.shape
    q, r = jnp.linalg.qr(normal.reshape(max(rows, cols), min(rows, cols)))
    q = q * jnp.sign(jnp.diagonal(r))
    return scale * (q.T if rows < cols else q)


def _is_box(x) -> bool:
    return isinstance(x, Orthogonal)


def kernel_normal_size(module: nn.Module, *example_args) -> int:
    """How many standard normal numbers `init_params` draws for `module`'s orthogonal kernels
    (a static count, from the shapes alone)."""
    variables = jax.eval_shape(lambda: module.init(jax.random.key(0), *example_args))
    return sum(leaf.normal_size for leaf in jax.tree.leaves(variables, is_leaf=_is_box)
               if _is_box(leaf))


def init_params(module: nn.Module, key: jax.Array, *example_args,
                normal: Optional[jax.Array] = None) -> Any:
    """`module.init(key, *example_args)` with every `orthogonal` kernel drawn at once.

    One normal sample of all the kernels' sizes (`normal [kernel_normal_size(...)]`, drawn
    from `key` when not given), then one QR per `[in, out]` matrix: a flax init draws each
    kernel from a key of its own, and on CPU every draw and key derivation is a kernel for XLA
    to compile (the init was a third of the training program's compile time). Each QR runs
    unbatched: on several CPU devices a batched LAPACK QR waits for pool threads that are all
    busy (a hang seen with 2 forced devices on 2 cores).
    """
    # flax folds each parameter's name into `key` before drawing: the same key serves both.
    leaves, treedef = jax.tree.flatten(module.init(key, *example_args), is_leaf=_is_box)
    boxes = [leaf for leaf in leaves if _is_box(leaf)]
    sizes = [box.normal_size for box in boxes]
    if normal is None:
        normal = jax.random.normal(key, (sum(sizes),))
    normals = jnp.split(normal, np.cumsum(sizes)[:-1])
    drawn = iter(_draw_kernel(box, normal) for box, normal in zip(boxes, normals))
    return jax.tree.unflatten(treedef, [next(drawn) if _is_box(leaf) else leaf
                                        for leaf in leaves])


def _draw_kernel(box: Orthogonal, normal: jax.Array) -> jax.Array:
    rows, cols = box.value.shape[-2:]
    kernels, start = [], 0
    for scale, columns in box.matrices():
        kernel = _orthogonal_from_normal(
            normal[start:start + rows * columns].reshape(rows, columns), scale)
        kernels.append(jnp.pad(kernel, ((0, 0), (0, cols - columns))))
        start += rows * columns
    return jnp.stack(kernels).reshape(box.value.shape)


def _dense(features: int, scale: float) -> nn.Dense:
    return nn.Dense(features, kernel_init=orthogonal(scale), bias_init=nn.initializers.zeros)


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

    @nn.compact
    def __call__(self, x: jax.Array, tower: Optional[int] = None) -> jax.Array:
        """`tower`: run only that tower of a batched MLP, `[N, D] -> [N, hidden_sizes[-1]]`
        (or the head's width)."""
        act = ACTIVATION_FNS[self.activation]
        if self.num_towers == 1:
            for size in self.hidden_sizes:
                x = act(_dense(size, np.sqrt(2.0))(x))
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
            if tower is None:
                x = layer_act(jnp.einsum("knd,kdh->knh", x, kernel) + bias)
            else:
                x = layer_act(x @ kernel[tower] + bias[tower])
        return x


def image_patches(x: jax.Array, kernel_size: int, strides: int) -> jax.Array:
    """SAME-padded k x k patches: `[N, H, W, C] -> [N, ceil(H / s), ceil(W / s), k * k * C]`.

    Built from shifted slices, so a convolution becomes one matmul; XLA:CPU runs that far
    faster than its convolution kernels (and their gradients) on these small images.
    """
    _, height, width, _ = x.shape
    out_h, out_w = -(-height // strides), -(-width // strides)
    pad_h = max((out_h - 1) * strides + kernel_size - height, 0)
    pad_w = max((out_w - 1) * strides + kernel_size - width, 0)
    x = jnp.pad(x, ((0, 0), (pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2),
                    (0, 0)))
    return jnp.concatenate(
        [x[:, i:i + (out_h - 1) * strides + 1:strides, j:j + (out_w - 1) * strides + 1:strides]
         for i in range(kernel_size) for j in range(kernel_size)], axis=-1)


class CNN(nn.Module):
    """SAME-padded convolutions (as patch matmuls, orthogonal init), then an MLP:
    `[N, H, W, C] -> [N, F]`."""

    channels: Sequence[int]
    kernel_size: int
    strides: int
    hidden_sizes: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATION_FNS[self.activation]
        for features in self.channels:
            x = act(_dense(features, np.sqrt(2.0))(image_patches(x, self.kernel_size, self.strides)))
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


class ActorCritic(nn.Module):
    """Maps observations `[B, *obs_shape]` to (policy output, value `[B]`).

    The policy output is logits `[B, num_outputs]`, or for a Gaussian policy (`gaussian=True`)
    `(mean, log_std)`, each `[B, num_outputs]`, with a learned state-independent log-std.
    `shared=True`: one torso feeds both heads. `shared=False`: separate policy and value towers.
    Heads use the usual PPO init: gain 0.01 for the policy, 1.0 for the value.
    """

    num_outputs: int
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared: bool = False
    gaussian: bool = False
    conv_channels: Sequence[int] = ()  # non-empty: a CNN torso over `[H, W, C]` observations
    conv_kernel: int = 3
    conv_stride: int = 1
    vocab_size: int = 0  # > 0: the serialized representation (needs obs_low / obs_high)
    embed_dim: int = 16
    obs_low: Sequence[float] = ()
    obs_high: Sequence[float] = ()

    def _torso(self) -> nn.Module:
        if self.conv_channels:
            return CNN(self.conv_channels, self.conv_kernel, self.conv_stride, self.hidden_sizes,
                       self.activation)
        mlp = MLP(self.hidden_sizes, self.activation)
        if self.vocab_size:
            return nn.Sequential([Tokenizer(self.obs_low, self.obs_high, self.vocab_size,
                                            self.embed_dim), mlp])
        return mlp

    @property
    def _batched_towers(self) -> bool:
        """Separate policy and value MLPs over raw inputs run as one two-tower MLP."""
        return not (self.shared or self.conv_channels or self.vocab_size)

    def setup(self):
        if self._batched_towers:  # the heads too: policy `[F, num_outputs]`, value `[F, 1]`
            self.towers = MLP(self.hidden_sizes, self.activation, num_towers=2,
                              head_sizes=(self.num_outputs, 1), head_scales=(0.01, 1.0))
        else:
            self.policy_torso = self._torso()
            if not self.shared:
                self.value_torso = self._torso()
            self.policy_head = _dense(self.num_outputs, 0.01)
            self.value_head = _dense(1, 1.0)
        if self.gaussian:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))

    def _flat(self, obs: jax.Array, batch_ndim: int) -> jax.Array:
        """`[*batch, *obs_shape]` -> `[N, D]` (MLP) or `[N, H, W, C]` (CNN; `[H, W]` gains C=1)."""
        batch, obs_shape = obs.shape[:batch_ndim], obs.shape[batch_ndim:]
        if not self.conv_channels:
            return obs.reshape(math.prod(batch), -1).astype(jnp.float32)
        image = obs_shape if len(obs_shape) == 3 else (*obs_shape, 1)
        return obs.reshape(math.prod(batch), *image).astype(jnp.float32)

    def _policy_out(self, head: jax.Array, batch: Tuple[int, ...]) -> Any:
        head = head.reshape(*batch, -1)
        return (head, jnp.broadcast_to(self.log_std, head.shape)) if self.gaussian else head

    def __call__(self, obs: jax.Array, batch_ndim: int = 1) -> Tuple[Any, jax.Array]:
        batch = obs.shape[:batch_ndim]
        x = self._flat(obs, batch_ndim)
        if self._batched_towers:
            out = self.towers(x)  # [2, N, num_outputs]
            policy_head, value = out[0], out[1, :, 0]
        else:
            policy_features = self.policy_torso(x)
            value_features = policy_features if self.shared else self.value_torso(x)
            policy_head, value = self.policy_head(policy_features), self.value_head(value_features)
        return self._policy_out(policy_head, batch), value.reshape(batch)

    def policy(self, obs: jax.Array, batch_ndim: int = 1) -> Any:
        """The actor alone: `__call__`'s policy output (batched towers: the policy tower only;
        a shared trunk computes what the value head would also read)."""
        x = self._flat(obs, batch_ndim)
        if self._batched_towers:
            head = self.towers(x, tower=0)
        else:
            head = self.policy_head(self.policy_torso(x))
        return self._policy_out(head, obs.shape[:batch_ndim])

    def value(self, obs: jax.Array, batch_ndim: int = 1) -> jax.Array:
        """The critic alone: `[*batch, *obs_shape] -> [*batch]` (batched towers: the value
        tower only)."""
        x = self._flat(obs, batch_ndim)
        if self._batched_towers:
            value = self.towers(x, tower=1)[:, 0]
        else:
            torso = self.policy_torso if self.shared else self.value_torso
            value = self.value_head(torso(x))
        return value.reshape(obs.shape[:batch_ndim])


def make_network(config: Config, spec: ActionSpec, obs_space) -> ActorCritic:
    """The actor-critic that `config.network` describes, for `spec`'s actions and observations
    of `obs_space` (whose bounds a quantizing torso uses)."""
    net = config.network
    bounds = {}
    if net.vocab_size:  # quantized within the bounds of what the network sees
        clip = config.env.clip_obs
        limits = ((-clip, clip) if config.env.normalize_obs
                  else (obs_space.low, obs_space.high))
        bounds = {key: tuple(np.broadcast_to(np.asarray(limit, np.float64),
                                             obs_space.shape).ravel().tolist())
                  for key, limit in zip(("low", "high"), limits)}
    return ActorCritic(num_outputs=spec.num_outputs, hidden_sizes=tuple(net.hidden_sizes),
                       activation=net.activation, shared=net.shared,
                       gaussian=spec.kind == "gaussian",
                       conv_channels=tuple(net.conv_channels), conv_kernel=net.conv_kernel,
                       conv_stride=net.conv_stride, vocab_size=net.vocab_size,
                       embed_dim=net.embed_dim, obs_low=bounds.get("low", ()),
                       obs_high=bounds.get("high", ()))
