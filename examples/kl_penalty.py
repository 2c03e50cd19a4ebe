"""An algorithm of your own: PPO with an adaptive KL penalty instead of clipping (Schulman et
al. 2017, "Proximal Policy Optimization Algorithms", section 4).

    python -m purerl.train +env=cartpole algorithm=examples.kl_penalty:make_kl_ppo

The surrogate `ratio * advantage` is not clipped; instead `beta * KL(pi_old || pi)` is
subtracted, and after each update `beta` adapts to the KL `d` the update measured: halved when
`d < TARGET_KL / 1.5`, doubled when `d > TARGET_KL * 1.5`. It is written against purerl's
algorithm protocol (`purerl.algorithm`) and wraps `purerl.make_ppo` rather than copying it:
`beta` is this algorithm's own hyperparameter (`HyperParams.extra`, one per member, copied by
PBT), the penalty a loss term, and the unclipped surrogate PPO's own term at `clip_eps` = +inf
(so metrics.jsonl's `clip_eps` is null). metrics.jsonl logs `loss/kl` and `loss/kl_beta`, the
KL and the beta of each update.
"""

from __future__ import annotations

import jax.numpy as jnp

import purerl
from purerl.distributions import ActionDistribution
from purerl.envs import check_env

TARGET_KL = 0.01
INITIAL_BETA = 1.0


def make_kl_ppo(config, env, env_params, **parts) -> purerl.Algorithm:
    """The algorithm for one seed: `purerl.make_ppo`'s with the KL penalty as a loss term,
    no clipping, and `beta` adapted after each update.

    Args:
        config, env, env_params: as `purerl.make_ppo` takes them.
        **parts: `num_envs`, `axis_name`, `network`, `loss_terms` and `optimizer`, passed on.

    Returns:
        The `purerl.Algorithm`.
    """
    policy = ActionDistribution(check_env(env, env_params, config.env.name))

    def kl_penalty(params, batch, outputs, hparams):
        """`beta * KL(pi_old || pi)`, the KL estimated per sample as `(ratio - 1) - log
        ratio` (unbiased, never negative)."""
        log_ratio = policy.log_prob(outputs[0], batch.action) - batch.log_prob
        kl = jnp.mean(jnp.expm1(log_ratio) - log_ratio)
        return hparams.extra * kl, {"kl": kl}

    loss_terms = [kl_penalty, *parts.pop("loss_terms", ())]
    ppo = purerl.make_ppo(config, env, env_params, loss_terms=loss_terms, **parts)

    def init(key, hparams):
        hparams = hparams._replace(clip_eps=jnp.float32(jnp.inf),
                                   extra=jnp.float32(INITIAL_BETA))
        return ppo.init(key, hparams)

    def update(state):
        state, metrics = ppo.update(state)
        kl, beta = metrics.losses["loss/kl"], state.hparams.extra
        new_beta = jnp.where(kl < TARGET_KL / 1.5, beta / 2,
                             jnp.where(kl > TARGET_KL * 1.5, beta * 2, beta))
        metrics = metrics._replace(losses={**metrics.losses, "loss/kl_beta": beta})
        return state._replace(hparams=state.hparams._replace(extra=new_beta)), metrics

    return purerl.Algorithm(init, update)
