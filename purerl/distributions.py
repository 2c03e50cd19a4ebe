"""Categorical policies factorized over controls: sample, log_prob, entropy, mode.

Logits are `[..., n]` for one control; actions are int32 `[...]`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def categorical_sample(key: jax.Array, logits: jax.Array, temperature: float = 1.0) -> jax.Array:
    """Samples from softmax(logits / temperature); temperature 0 gives the mode."""
    if temperature == 0.0:
        return categorical_mode(logits)
    return jax.random.categorical(key, logits / temperature, axis=-1).astype(jnp.int32)


def categorical_sample_gumbel(gumbel: jax.Array, logits: jax.Array) -> jax.Array:
    """Samples from softmax(logits) given standard Gumbel noise of logits' shape (Gumbel-max,
    as `jax.random.categorical` does), so the noise can be drawn ahead of a loop."""
    return jnp.argmax(logits + gumbel, axis=-1).astype(jnp.int32)


def categorical_mode(logits: jax.Array) -> jax.Array:
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def categorical_log_prob(logits: jax.Array, action: jax.Array) -> jax.Array:
    # A one-hot mask rather than a gather: it fuses with the softmax, and its gradient is not a
    # scatter (which XLA:CPU runs as a separate, slow op).
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    one_hot = action[..., None].astype(jnp.int32) == jnp.arange(logits.shape[-1])
    return jnp.sum(jnp.where(one_hot, log_probs, 0.0), axis=-1)


def categorical_entropy(logits: jax.Array) -> jax.Array:
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)
