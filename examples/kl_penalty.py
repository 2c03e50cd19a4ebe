"""An algorithm of your own: PPO with an adaptive KL penalty instead of clipping (Schulman et
al. 2017, "Proximal Policy Optimization Algorithms", section 4).

    python -m purerl.train +env=cartpole algorithm=examples.kl_penalty:make_kl_ppo \
        algorithm.target_kl=0.02 algorithm.kl_beta=0.5

The objective is the unclipped surrogate `ratio * advantage` minus `beta * KL(pi_old || pi)`
(with PPO's value loss and entropy bonus), and after each update `beta` adapts to the KL `d`
the update measured: halved when `d < target_kl / 1.5`, doubled when `d > target_kl * 1.5`.
It is written against purerl's algorithm protocol (`purerl.algos.algorithm`) and wraps
`purerl.make_ppo` rather than copying it: the objective replaces PPO's own loss term
(`make_ppo(objective=)`). Its settings are `algorithm.target_kl` and `algorithm.kl_beta`
(`KLPenalty`); `kl_beta` is a hyperparameter, an array in `HyperParams.extra["kl_beta"]` (one
per member), so `sweep.algorithm.kl_beta=[0.5,2.0]` sweeps it in one program and
`pbt.hparams=[algorithm.kl_beta]` evolves it. metrics.jsonl logs the objective's
`loss/policy_loss`, `loss/value_loss`, `loss/entropy` and `loss/approx_kl`, and `kl_beta`, the
beta of each update; PPO's `clip_eps` is not logged, since nothing is clipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp

import purerl
from purerl.envs import check_env
from purerl.nets.distributions import ActionDistribution


@dataclass
class KLPenalty:
    """The `algorithm.<key>` settings of the KL-penalty algorithm.

    Attributes:
        target_kl: the KL per update that `beta` adapts towards.
        kl_beta: the penalty's weight before the first update; a hyperparameter, adapted
            after every update.
    """

    target_kl: float = 0.01
    kl_beta: float = purerl.hyperparameter(1.0)

    def __post_init__(self):
        if not self.target_kl > 0:
            raise ValueError(f"target_kl={self.target_kl} must be > 0")


def make_kl_ppo(config, env, env_params, *, settings: KLPenalty, **parts) -> purerl.Algorithm:
    """The algorithm for one seed: `purerl.make_ppo` with the KL-penalized objective in place
    of the clipped one, and `beta` adapted after each update.

    Args:
        config, env, env_params: as `purerl.make_ppo` takes them.
        settings: its own settings (`kl_beta` None: its value is `hparams.extra["kl_beta"]`).
        **parts: `num_envs`, `axis_name`, `network`, `loss_terms`, `optimizer` and `plan`,
            passed on.

    Returns:
        The `purerl.Algorithm`.
    """
    policy = ActionDistribution(check_env(env, env_params, config.env.name))

    def kl_penalized(params, batch, outputs, hparams):
        """The unclipped surrogate, the value loss and the entropy bonus as PPO weighs them,
        and `beta * KL(pi_old || pi)`, the KL estimated per sample as `(ratio - 1) - log
        ratio` (unbiased, never negative). `batch` `[N]`, `outputs` `(logits, value [N])`."""
        del params  # the outputs are all it needs
        policy_out, value = outputs[:2]
        log_ratio = policy.log_prob(policy_out, batch.action) - batch.log_prob
        policy_loss = -jnp.mean(jnp.exp(log_ratio) * batch.advantages)
        value_loss = 0.5 * jnp.mean(jnp.square(value - batch.returns))
        entropy = jnp.mean(policy.entropy(policy_out))
        kl = jnp.mean(jnp.expm1(log_ratio) - log_ratio)
        loss = (policy_loss + hparams.vf_coef * value_loss - hparams.ent_coef * entropy
                + hparams.extra["kl_beta"] * kl)
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss,
                      "entropy": entropy, "approx_kl": kl}

    ppo = purerl.make_ppo(config, env, env_params, objective=kl_penalized, **parts)

    target_kl = settings.target_kl

    def update(state):
        state, metrics = ppo.update(state)
        kl, beta = metrics.scalars["loss/approx_kl"], state.hparams.extra["kl_beta"]
        new_beta = jnp.where(kl < target_kl / 1.5, beta / 2,
                             jnp.where(kl > target_kl * 1.5, beta * 2, beta))
        scalars = {name: value for name, value in metrics.scalars.items() if name != "clip_eps"}
        metrics = metrics._replace(scalars={**scalars, "kl_beta": beta})
        hparams = state.hparams._replace(extra={"kl_beta": new_beta})
        return state._replace(hparams=hparams), metrics

    return ppo._replace(update=update)  # PPO's init and agent: evaluation acts with it


make_kl_ppo.settings = KLPenalty
