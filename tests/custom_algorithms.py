"""Algorithms of a user's for the tests: PPO with a loss term that logs `ppo.clip_eps` as
read from the config when the algorithm was built (a Python number baked into the program);
PPO on a network that the algorithm chooses."""

import custom_networks
import jax.numpy as jnp

import purerl


def clip_eps_read_at_build(config, env, env_params, **parts) -> purerl.Algorithm:
    """`purerl.make_ppo` with a term logging `loss/clip_eps_read`, the `ppo.clip_eps` that the
    algorithm read as a Python number."""
    read = float(config.ppo.clip_eps)

    def logs_clip_eps(params, batch, outputs, hparams):
        return jnp.float32(0.0), {"clip_eps_read": jnp.float32(read)}

    loss_terms = [logs_clip_eps, *parts.pop("loss_terms", ())]
    return purerl.make_ppo(config, env, env_params, loss_terms=loss_terms, **parts)


def ppo_on_its_own_network(config, env, env_params, **parts) -> purerl.Algorithm:
    """`purerl.make_ppo` on `custom_networks.small`, which the algorithm chooses whatever the
    `network` settings say."""
    return purerl.make_ppo(config, env, env_params, **{**parts, "network": custom_networks.small})
