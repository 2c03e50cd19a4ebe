"""Networks of a user's for the tests: factories that `network.factory` names."""

import flax.linen as nn


class _TwoHeads(nn.Module):
    num_outputs: int
    value_width: int = 1  # the value's trailing axis: 1 is squeezed, anything else kept

    @nn.compact
    def __call__(self, obs):
        x = nn.tanh(nn.Dense(16)(obs.reshape(obs.shape[0], -1)))
        value = nn.Dense(self.value_width)(x)
        return nn.Dense(self.num_outputs)(x), value[:, 0] if self.value_width == 1 else value


def small(obs_shape, action_spec, network_config):
    """A small shared MLP with the right shapes."""
    return _TwoHeads(action_spec.num_outputs)


def value_with_axis(obs_shape, action_spec, network_config):
    """The value as `[B, 3]`: refused before training."""
    return _TwoHeads(action_spec.num_outputs, value_width=3)


def too_few_logits(obs_shape, action_spec, network_config):
    """One logit fewer than the actions need: refused before training."""
    return _TwoHeads(action_spec.num_outputs - 1)


class _Memory(nn.Module):
    """A carry of `carry_size` in, one of `out_size` out."""

    num_outputs: int
    carry_size: object = 4
    out_size: int = 4

    @nn.compact
    def __call__(self, carry, obs):
        x = nn.tanh(nn.Dense(self.out_size)(obs.reshape(obs.shape[0], -1)))
        return x, nn.Dense(self.num_outputs)(x), nn.Dense(1)(x)[:, 0]


def carry_grows(obs_shape, action_spec, network_config):
    """A network with memory whose carry out is wider than its carry in: refused."""
    return _Memory(action_spec.num_outputs, carry_size=4, out_size=6)


def carry_size_not_an_int(obs_shape, action_spec, network_config):
    """`carry_size` 2.5: refused."""
    return _Memory(action_spec.num_outputs, carry_size=2.5)


def purerl_wider(obs_shape, action_spec, network_config):
    """purerl's own network through the factory contract, twice as wide as the settings say:
    a whole `ActorCriticNetwork`, used as it is (not wrapped)."""
    import dataclasses

    from purerl.nets.networks import purerl_network

    wider = [2 * size for size in network_config.hidden_sizes]
    return purerl_network(obs_shape, action_spec,
                          dataclasses.replace(network_config, hidden_sizes=wider))
