"""Action distributions: categoricals factorized over controls, and a diagonal Gaussian.

The policy head's output is `logits [..., sum(num_choices)]` (categorical) or
`(mean, log_std)`, each `[..., d]` (Gaussian). Actions are flat: int32 `[..., num_controls]`
or float32 `[..., d]`; `ActionSpec.to_env` turns them into what the env takes. Sampling takes
noise drawn ahead of time (`noise`, or `noise_from_bits` of bits drawn with others), so a
rollout can draw all of its noise before the scan. Temperature tau scales logits by 1 / tau
or the std by tau; tau = 0 gives the mode.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Tuple

import jax
import jax.numpy as jnp

from purerl.core.prng import gumbel_from_bits, normal_from_bits
from purerl.envs.action_spaces import ActionSpec

LOG_2PI = math.log(2.0 * math.pi)
# The logit of an illegal action (`ActionDistribution.masked`): its probability is exactly 0
# after the softmax, and its Gumbel-noised logit never wins, without the infinities of -inf.
MASKED_LOGIT = -1e9


# Up to this many choices, reductions over a categorical's choices are written as elementwise
# ops over its columns. XLA:CPU fuses those with the ops around them, where a reduction over a
# short last axis is a kernel of its own: a few fewer kernel calls in every rollout step.
UNROLLED_MAX_CHOICES = 8


def _columns(x: jax.Array) -> list:
    return [x[..., i] for i in range(x.shape[-1])]


def _reduce_choices(x: jax.Array, op: Callable, reduction: Callable) -> jax.Array:
    """`reduction(x, axis=-1)`, as a chain of the elementwise `op` for few choices."""
    if x.shape[-1] > UNROLLED_MAX_CHOICES:
        return reduction(x, axis=-1)
    return functools.reduce(op, _columns(x))


def categorical_mode(logits: jax.Array) -> jax.Array:
    """argmax over the last axis (the first index among ties), int32 `[...]`.

    Args:
        logits: `[..., n]`.

    Returns:
        int32 `[...]`.
    """
    if logits.shape[-1] > UNROLLED_MAX_CHOICES:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    columns = _columns(logits)
    best, index = columns[0], jnp.zeros(logits.shape[:-1], jnp.int32)
    for i, column in enumerate(columns[1:], start=1):
        better = column > best
        best, index = jnp.where(better, column, best), jnp.where(better, i, index)
    return index


def categorical_log_softmax(logits: jax.Array) -> jax.Array:
    """log softmax over the last axis, `[..., n] -> [..., n]` (as `jax.nn.log_softmax`).

    Args:
        logits: `[..., n]`.

    Returns:
        `[..., n]`, `logits`' dtype.
    """
    shifted = logits - jax.lax.stop_gradient(
        _reduce_choices(logits, jnp.maximum, jnp.max))[..., None]
    return shifted - jnp.log(_reduce_choices(jnp.exp(shifted), jnp.add, jnp.sum))[..., None]


def categorical_log_prob(logits: jax.Array, action: jax.Array) -> jax.Array:
    """log softmax(logits)[action], `[..., n]`, `[...]` -> `[...]`.

    Args:
        logits: `[..., n]`.
        action: integer indices `[...]` in `[0, n)`.

    Returns:
        `[...]`.
    """
    # A one-hot mask rather than a gather: it fuses with the softmax, and its gradient is not a
    # scatter (which XLA:CPU runs as a separate, slow op).
    log_probs = categorical_log_softmax(logits)
    one_hot = action[..., None].astype(jnp.int32) == jnp.arange(logits.shape[-1])
    return _reduce_choices(jnp.where(one_hot, log_probs, 0.0), jnp.add, jnp.sum)


def categorical_entropy(logits: jax.Array) -> jax.Array:
    """The entropy of softmax(logits) over the last axis.

    Args:
        logits: `[..., n]`.

    Returns:
        `[...]`.
    """
    log_probs = categorical_log_softmax(logits)
    return -_reduce_choices(jnp.exp(log_probs) * log_probs, jnp.add, jnp.sum)


@dataclass(frozen=True)
class ActionDistribution:
    """The policy's distribution for an `ActionSpec` (static: safe to close over in jit)."""

    spec: ActionSpec

    @property
    def is_gaussian(self) -> bool:
        """Whether the actions are a diagonal Gaussian's (a Box), not categoricals."""
        return self.spec.kind == "gaussian"

    def _split(self, logits: jax.Array) -> Tuple[jax.Array, ...]:
        bounds = [sum(self.spec.num_choices[:i]) for i in range(1, self.spec.num_controls)]
        return tuple(jnp.split(logits, bounds, axis=-1))

    def masked(self, out, mask: jax.Array):
        """A categorical head's logits with the actions where bool `mask [..., num_outputs]` is
        False made impossible: never sampled, no probability, no entropy, no gradient.

        Args:
            out: logits `[..., num_outputs]`.
            mask: bool `[..., num_outputs]` (broadcasting against `out`).

        Returns:
            The logits, -1e9 where `mask` is False.
        """
        return jnp.where(mask, out, MASKED_LOGIT)

    def noise_shape(self, batch_shape: Tuple[int, ...]) -> Tuple[int, ...]:
        """The shape of the noise (and of its uint32 bits) that one action of each of `batch_shape`
        samples with.

        Args:
            batch_shape: the leading shape, e.g. `(B,)`.

        Returns:
            `(*batch_shape, num_outputs)`.
        """
        return (*batch_shape, self.spec.num_outputs)

    def noise_from_bits(self, bits: jax.Array) -> jax.Array:
        """Gumbel (categorical) or standard normal (Gaussian) noise of uint32 `bits` shaped
        `noise_shape(batch_shape)`.

        Args:
            bits: uint32 `[*batch, num_outputs]`.

        Returns:
            float32 noise, `bits`' shape.
        """
        return normal_from_bits(bits) if self.is_gaussian else gumbel_from_bits(bits)

    def noise(self, key: jax.Array, batch_shape: Tuple[int, ...]) -> jax.Array:
        """Gumbel `[*batch, sum(num_choices)]` or standard normal `[*batch, d]` noise, as
        `jax.random.gumbel` or `jax.random.normal` draw it from `key`.

        Args:
            key: a PRNG key.
            batch_shape: the leading shape.

        Returns:
            float32 `[*batch_shape, num_outputs]`.
        """
        return self.noise_from_bits(jax.random.bits(key, self.noise_shape(batch_shape)))

    def sample(self, out, noise: jax.Array, temperature: float | jax.Array = 1.0) -> jax.Array:
        """An action from the head's output `out` and `noise` (from `noise`), at `temperature`.

        Args:
            out: the head's output: logits `[..., num_outputs]` (categorical), or `(mean,
                log_std)` each `[..., d]` (Gaussian).
            noise: `[..., num_outputs]`, from `noise` or `noise_from_bits`.
            temperature: scales the noise; 0.0 gives the mode.

        Returns:
            `[..., num_controls]`: int32 choices per control (categorical), or float32 unclipped
                values (Gaussian).
        """
        if self.is_gaussian:
            mean, log_std = out
            return mean + temperature * jnp.exp(log_std) * noise
        # Gumbel-max on logits / tau is argmax(logits + tau * gumbel); tau = 0 is the mode.
        noisy = out + temperature * noise
        return jnp.stack([categorical_mode(part) for part in self._split(noisy)], axis=-1)

    def mode(self, out) -> jax.Array:
        """The most likely action: each control's argmax, or the Gaussian's mean.

        Args:
            out: the head's output, as `sample` takes it.

        Returns:
            `[..., num_controls]`, as `sample` gives it.
        """
        if self.is_gaussian:
            return out[0]
        return jnp.stack([categorical_mode(part) for part in self._split(out)], axis=-1)

    def log_prob(self, out, action: jax.Array) -> jax.Array:
        """Log-density `[...]` of flat actions `[..., num_controls]` (unclipped, for a Box).

        Args:
            out: the head's output, as `sample` takes it.
            action: `[..., num_controls]`.

        Returns:
            `[...]`, summed over the controls.
        """
        if self.is_gaussian:
            mean, log_std = out
            z = (action - mean) * jnp.exp(-log_std)
            return jnp.sum(-0.5 * jnp.square(z) - log_std - 0.5 * LOG_2PI, axis=-1)
        return sum(categorical_log_prob(part, action[..., i])
                   for i, part in enumerate(self._split(out)))

    def entropy(self, out) -> jax.Array:
        """The distribution's entropy, summed over the controls.

        Args:
            out: the head's output, as `sample` takes it.

        Returns:
            `[...]`.
        """
        if self.is_gaussian:
            _, log_std = out
            return jnp.sum(log_std + 0.5 * (LOG_2PI + 1.0), axis=-1)
        return sum(categorical_entropy(part) for part in self._split(out))
