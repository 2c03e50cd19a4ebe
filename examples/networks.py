"""A network of your own: `network.factory=examples.networks:residual_mlp`.

purerl calls the factory with the observation shape the policy sees, the `ActionSpec` and the
`network` settings, and trains the flax module it returns. The module maps float32
observations `[B, *obs_shape]` to `(policy_out, value)`: `policy_out` the logits
`[B, action_spec.num_outputs]` (the mean of a Gaussian policy for a Box action space, whose
log-std purerl learns itself), `value` `[B]`. Anything returned after those two reaches the
loss terms (`examples/loss_terms.py`).

    python -m purerl.train +env=cartpole network.factory=examples.networks:residual_mlp

A network with memory has an int attribute `carry_size` and maps `(carry [B, carry_size],
obs [B, *obs_shape])` to `(carry, policy_out, value)`; purerl zeroes an env's carry at its
episode's start, and trains it with the sequence learner as it trains `network=gru`:

    python -m purerl.train +env=memorychain-bsuite network=mlp \
        network.factory=examples.networks:gru_memory
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp


class ResidualMLP(nn.Module):
    """A shared trunk of pre-norm residual blocks, then linear policy and value heads, and an
    auxiliary head predicting the value's sign (`aux`, `[B]`)."""

    num_outputs: int
    width: int = 64
    blocks: int = 2

    @nn.compact
    def __call__(self, obs: jnp.ndarray):
        x = nn.Dense(self.width)(obs.reshape(obs.shape[0], -1))
        for _ in range(self.blocks):
            x = x + nn.Dense(self.width)(nn.relu(nn.LayerNorm()(x)))
        x = nn.relu(nn.LayerNorm()(x))
        logits = nn.Dense(self.num_outputs, kernel_init=nn.initializers.orthogonal(0.01))(x)
        value = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))(x)[:, 0]
        aux = nn.Dense(1)(x)[:, 0]
        return logits, value, aux


def residual_mlp(obs_shape, action_spec, network_config) -> nn.Module:
    """The factory: the trunk as wide as the first of `network.hidden_sizes`, one residual
    block per entry."""
    del obs_shape  # the Dense layers take any input width
    sizes = network_config.hidden_sizes
    return ResidualMLP(action_spec.num_outputs, width=int(sizes[0]), blocks=len(sizes))


class GRUMemory(nn.Module):
    """A Dense embedding, a GRU cell of `carry_size` units, then linear policy and value
    heads: `(carry [B, C], obs [B, ...]) -> (carry, logits [B, num_outputs], value [B])`."""

    num_outputs: int
    carry_size: int = 64

    @nn.compact
    def __call__(self, carry: jnp.ndarray, obs: jnp.ndarray):
        x = nn.relu(nn.Dense(self.carry_size)(obs.reshape(obs.shape[0], -1)))
        carry, x = nn.GRUCell(self.carry_size)(carry, x)
        logits = nn.Dense(self.num_outputs, kernel_init=nn.initializers.orthogonal(0.01))(x)
        value = nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))(x)[:, 0]
        return carry, logits, value


def gru_memory(obs_shape, action_spec, network_config) -> nn.Module:
    """The factory of a network with memory: a GRU of `network.rnn_size` units."""
    del obs_shape
    return GRUMemory(action_spec.num_outputs, carry_size=int(network_config.rnn_size))
