"""Torsos and the actor-critic: a shared trunk with two heads, or two separate towers."""

from __future__ import annotations

from typing import Any, Callable, Sequence, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

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


def _dense(features: int, scale: float) -> nn.Dense:
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale),
                    bias_init=nn.initializers.zeros)


class MLP(nn.Module):
    """Dense layers with orthogonal init (gain sqrt 2): `[..., D] -> [..., hidden_sizes[-1]]`."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATION_FNS[self.activation]
        for size in self.hidden_sizes:
            x = act(_dense(size, np.sqrt(2.0))(x))
        return x


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

    def setup(self):
        self.policy_torso = MLP(self.hidden_sizes, self.activation)
        if not self.shared:
            self.value_torso = MLP(self.hidden_sizes, self.activation)
        self.policy_head = _dense(self.num_outputs, 0.01)
        self.value_head = _dense(1, 1.0)
        if self.gaussian:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))

    def _flat(self, obs: jax.Array, batch_ndim: int) -> jax.Array:
        return obs.reshape(obs.shape[:batch_ndim] + (-1,)).astype(jnp.float32)

    def __call__(self, obs: jax.Array, batch_ndim: int = 1) -> Tuple[Any, jax.Array]:
        x = self._flat(obs, batch_ndim)
        policy_features = self.policy_torso(x)
        value_features = policy_features if self.shared else self.value_torso(x)
        head = self.policy_head(policy_features)
        policy = (head, jnp.broadcast_to(self.log_std, head.shape)) if self.gaussian else head
        return policy, self.value_head(value_features)[..., 0]

    def value(self, obs: jax.Array, batch_ndim: int = 1) -> jax.Array:
        """The critic alone: `[*batch, *obs_shape] -> [*batch]`."""
        x = self._flat(obs, batch_ndim)
        features = self.policy_torso(x) if self.shared else self.value_torso(x)
        return self.value_head(features)[..., 0]
