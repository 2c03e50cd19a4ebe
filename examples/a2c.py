"""A second on-policy algorithm that is not PPO: A2C (Mnih et al. 2016, "Asynchronous Methods
for Deep Reinforcement Learning", in its synchronous form).

    python -m purerl.train +env=cartpole algorithm=examples.a2c:make_a2c ppo.lr=7e-4 \
        ppo.num_steps=8 ppo.gae_lambda=1.0 env.num_envs=16 total_timesteps=1000000

(A2C's n-step returns, `gae_lambda=1`, over 8 steps of 16 envs: CartPole's 500 in about 10 s
on 2 CPU cores, 4 seeds out of 4.)

Each update is one gradient step on the whole rollout: the plain policy gradient
`-log pi(a | s) * advantage` (no ratio, no clipping), with the value loss and entropy bonus
weighed as PPO weighs them, the advantages from GAE and normalized over the rollout. It is
written against purerl's algorithm protocol and wraps `purerl.make_ppo` for its rollout, GAE
and learner: the objective replaces PPO's (`make_ppo(objective=)`), and the learner takes one
epoch of one minibatch, whatever `ppo.num_epochs`, `ppo.num_minibatches` and `ppo.target_kl`
say. It reads the rest of the `ppo` settings (`num_steps`, `lr`, `gamma`, `gae_lambda`,
`ent_coef`, `vf_coef`, `max_grad_norm`, their schedules). metrics.jsonl logs
`loss/policy_loss`, `loss/value_loss` and `loss/entropy`; PPO's `clip_eps` is not logged.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

import purerl
from purerl.envs import check_env
from purerl.nets.distributions import ActionDistribution


def make_a2c(config, env, env_params, **parts) -> purerl.Algorithm:
    """A2C for one seed: `purerl.make_ppo`'s rollout and learner, one step per update on the
    policy-gradient objective.

    Args:
        config, env, env_params: as `purerl.make_ppo` takes them.
        **parts: `num_envs`, `axis_name`, `network`, `loss_terms`, `optimizer` and `plan`,
            passed on.

    Returns:
        The `purerl.Algorithm`.
    """
    policy = ActionDistribution(check_env(env, env_params, config.env.name))

    def policy_gradient(params, batch, outputs, hparams):
        """`-mean(log pi(a | s) * A) + vf_coef * value loss - ent_coef * entropy` over the
        batch `[N]`; `outputs` `(policy_out, value [N])`."""
        del params  # the outputs are all it needs
        policy_out, value = outputs[:2]
        policy_loss = -jnp.mean(policy.log_prob(policy_out, batch.action) * batch.advantages)
        value_loss = 0.5 * jnp.mean(jnp.square(value - batch.returns))
        entropy = jnp.mean(policy.entropy(policy_out))
        loss = policy_loss + hparams.vf_coef * value_loss - hparams.ent_coef * entropy
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}

    one_step = dataclasses.replace(
        config, ppo=dataclasses.replace(config.ppo, num_epochs=1, num_minibatches=1,
                                        target_kl=None),
        sweep=dataclasses.replace(config.sweep, target_kl=None))
    a2c = purerl.make_ppo(one_step, env, env_params, objective=policy_gradient, **parts)

    def update(state):
        state, metrics = a2c.update(state)
        scalars = {name: value for name, value in metrics.scalars.items() if name != "clip_eps"}
        return state, metrics._replace(scalars=scalars)

    return a2c._replace(update=update)  # PPO's init and agent
