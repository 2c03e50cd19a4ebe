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


def categorical_mode(logits: jax.Array) -> jax.Array:
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def categorical_log_prob(logits: jax.Array, action: jax.Array) -> jax.Array:
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(log_probs, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def categorical_entropy(logits: jax.Array) -> jax.Array:
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)
