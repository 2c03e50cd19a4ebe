"""A PPO variant with another learner: PPO's epochs on the policy, then a value phase, as
Phasic Policy Gradient separates them (Cobbe et al. 2021, "Phasic Policy Gradient").

    python -m purerl.train +env=cartpole algorithm=examples.value_phase:make_value_phase_ppo

Each update learns from the rollout's batch twice, through `purerl.make_learner`: first PPO's
`ppo.num_epochs` x `ppo.num_minibatches` steps on its clipped objective with the value loss
weighed 0 (the target-KL stop, when set, ends this phase early), then `VALUE_EPOCHS` x
`ppo.num_minibatches` steps on the value loss alone, with an Adam state of its own. PPG's
auxiliary phase also distills the value into the policy network and runs only every few
updates; this keeps the part that changes the learner's structure. It wraps `purerl.make_ppo`
(`make_ppo(learner=)`) for the rollout, GAE and PPO's objective; metrics.jsonl logs PPO's
`loss/...` of the policy phase, `loss/value_phase_loss` (the value phase's mean) and
`opt_steps` of both phases.
"""

from __future__ import annotations

import jax.numpy as jnp

import purerl
from purerl.algos.learner import Learned, Learner

VALUE_EPOCHS = 4  # the value phase's passes over the batch


def make_value_phase_ppo(config, env, env_params, **parts) -> purerl.Algorithm:
    """PPO for one seed whose learner adds a value phase after the policy's epochs.

    Args:
        config, env, env_params: as `purerl.make_ppo` takes them.
        **parts: `num_envs`, `axis_name`, `network`, `loss_terms`, `optimizer` and `plan`,
            passed on.

    Returns:
        The `purerl.Algorithm`.
    """
    return purerl.make_ppo(config, env, env_params, learner=two_phase_learner, **parts)


def value_phase_loss(params, batch, outputs, hparams):
    """`0.5 * mean((V(obs) - returns)^2)` over the minibatch `[N]`: the value phase's loss."""
    del params, hparams
    loss = 0.5 * jnp.mean(jnp.square(outputs[1] - batch.returns))
    return loss, {"value_phase_loss": loss}


def two_phase_learner(agent, loss_terms, *, num_epochs, stop_rule=None, **settings) -> Learner:
    """A `purerl.MakeLearner`: `make_learner`'s policy phase (`loss_terms` with `vf_coef` 0,
    `num_epochs`, `stop_rule`), then its value phase (`value_phase_loss`, `VALUE_EPOCHS`).

    Args:
        agent, loss_terms, num_epochs, stop_rule: as `purerl.make_learner` takes them.
        **settings: the rest of `make_learner`'s keywords, the same for both phases.

    Returns:
        The `purerl.Learner`; its optimizer state is the pair of the phases' own, and its
            shuffle bits the policy phase's rows then the value phase's.
    """
    policy = purerl.make_learner(agent, loss_terms, num_epochs=num_epochs,
                                 stop_rule=stop_rule, **settings)
    value = purerl.make_learner(agent, [value_phase_loss], num_epochs=VALUE_EPOCHS, **settings)
    # one row of shuffle bits per epoch, rows alike for one batch size
    split = policy.shuffle_shape[0]
    shuffle_shape = (split + value.shuffle_shape[0], *policy.shuffle_shape[1:])

    def init_opt_state(params, hparams):
        return policy.init_opt_state(params, hparams), value.init_opt_state(params, hparams)

    def learn(params, opt_state, batch, shuffle_bits, hparams) -> Learned:
        policy_opt, value_opt = opt_state
        first = policy.learn(params, policy_opt, batch, shuffle_bits[:split],
                             hparams._replace(vf_coef=jnp.zeros_like(hparams.vf_coef)))
        second = value.learn(first.params, value_opt, batch, shuffle_bits[split:], hparams)
        return Learned(second.params, (first.opt_state, second.opt_state),
                       {**first.info, **second.info}, first.opt_steps + second.opt_steps,
                       first.nonfinite | second.nonfinite)

    return Learner(shuffle_shape, learn, init_opt_state)
