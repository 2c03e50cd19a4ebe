"""The PPO loss as a pure function of arrays, and loss terms: what the learner sums.

A loss term (`LossTerm`) is `term(params, batch, outputs, hparams) -> (loss, metrics)`; PPO's
own clipped surrogate, value loss and entropy bonus are one such term (`ppo_term`).
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Protocol, Tuple

import jax
import jax.numpy as jnp

from purerl.core.schedules import HyperParams


class Batch(NamedTuple):
    """What the learner learns from: `[N, ...]` samples (N = envs x steps) for a feed-forward
    policy; for a recurrent one, time-major sequences `[T, B, ...]`, with `first` and
    `carry`. A loss term sees a minibatch of it, `[n, ...]` samples (a recurrent one's
    replayed sequences flattened to samples, `first` and `carry` None).

    Attributes:
        obs: the network's input, `[N, *obs_shape]` (normalized when normalization is on).
        action: the actions taken, `[N, ...]`.
        log_prob: float `[N]`, their log-probability under the rollout's policy.
        value: float `[N]`, the rollout's V(obs).
        advantages: float `[N]`; in a loss term's minibatch, normalized over it.
        returns: float `[N]`, the value targets.
        first: bool `[T, B]`, whether obs is its episode's first (recurrent); else None.
        carry: `[B, C]`, the memory at the sequences' start (recurrent); else None.
        action_mask: bool `[N, num_actions]`, the legal actions; None when unmasked.
    """

    obs: jax.Array  # the network's input
    action: jax.Array
    log_prob: jax.Array  # of the action under the rollout's policy
    value: jax.Array  # the rollout's V(obs)
    advantages: jax.Array  # not normalized (each minibatch normalizes its own)
    returns: jax.Array
    first: Optional[jax.Array] = None  # bool `[T, B]`: obs is its episode's first (recurrent)
    carry: Optional[jax.Array] = None  # `[B, C]`: the carry at the sequences' start (recurrent)
    action_mask: Optional[jax.Array] = None  # bool `[..., num_actions]`: legal actions, if masked


class LossTerm(Protocol):
    """A term of the learner's loss: the learner sums its terms' losses into each minibatch's
    loss and logs their metrics as `loss/<name>` (`purerl.algos.learner.make_learner`).

    PPO's own clipped objective is one (`ppo_term`); pass more with `ppo.loss_terms=
    [pkg.module:fn]` or `make_program(config, loss_terms=[...])`, or replace PPO's with
    `make_ppo(objective=)`. Any function of these four parameters is one.
    """

    def __call__(self, params: Any, batch: Batch, outputs: Tuple[jax.Array, ...],
                 hparams: HyperParams) -> Tuple[jax.Array, Dict[str, jax.Array]]:
        """The term's loss and metrics on a minibatch.

        Args:
            params: the network's parameter tree.
            batch: the minibatch, `purerl.core.losses.Batch`: `obs`, `action`, `log_prob` and
                `value` (the rollout's), `advantages` (normalized over the minibatch),
                `returns`, `action_mask`; each `[N, ...]`.
            outputs: the network's output on `batch.obs`, `(policy_out, value [N], *extras)`,
                `policy_out` already masked.
            hparams: the update's (scheduled) hyperparameters, traced scalars.

        Returns:
            The tuple `(loss, metrics)`: a scalar added to the minibatch's loss, and a dict
                of scalars averaged over the update's minibatches and logged as
                `loss/<name>`.
        """


class LossInfo(NamedTuple):
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array  # mean of (ratio - 1) - log ratio, always >= 0
    clip_frac: jax.Array  # share of samples with |ratio - 1| > clip_eps


def ppo_loss(
    log_prob: jax.Array,
    entropy: jax.Array,
    value: jax.Array,
    old_log_prob: jax.Array,
    old_value: jax.Array,
    advantages: jax.Array,
    returns: jax.Array,
    *,
    clip_eps: float | jax.Array,
    vf_coef: float | jax.Array,
    ent_coef: float | jax.Array,
    clip_value: bool,
) -> Tuple[jax.Array, LossInfo]:
    """PPO's clipped-surrogate loss, value loss and entropy bonus over a minibatch.

    The loss is `policy_loss + vf_coef * value_loss - ent_coef * entropy`, each a mean over
    the minibatch. The value loss is 0.5 * squared error, maximized with its clipped twin
    (the value moved at most `clip_eps` from `old_value`) when `clip_value`.

    Args:
        log_prob: float `[N]`, log pi(action | obs) under the current parameters.
        entropy: float `[N]`, the entropy of the current policy at each obs.
        value: float `[N]`, the current V(obs).
        old_log_prob: float `[N]`, log pi(action | obs) under the rollout's policy.
        old_value: float `[N]`, the rollout's V(obs).
        advantages: float `[N]`, used as given (normalize them first with
            `normalize_advantages`).
        returns: float `[N]`, the value targets.
        clip_eps: the ratio clip (and the value clip), a scalar.
        vf_coef: the value loss's weight, a scalar.
        ent_coef: the entropy bonus's weight, a scalar.
        clip_value: whether to clip the value loss.

    Returns:
        The tuple `(loss, info)`: the scalar loss to minimize and its `LossInfo` of scalars
            (`policy_loss`, `value_loss`, `entropy`, `approx_kl`, `clip_frac`; the last two
            without gradient).
    """
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    surrogate = jnp.minimum(
        ratio * advantages, jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    )
    value_error = jnp.square(value - returns)
    if clip_value:
        clipped = old_value + jnp.clip(value - old_value, -clip_eps, clip_eps)
        value_error = jnp.maximum(value_error, jnp.square(clipped - returns))
    # All five means in one reduction (one kernel instead of five on CPU).
    policy_loss, value_loss, mean_entropy, approx_kl, clip_frac = jnp.stack([
        -surrogate,
        0.5 * value_error,
        entropy,
        jax.lax.stop_gradient((ratio - 1.0) - log_ratio),
        jax.lax.stop_gradient((jnp.abs(ratio - 1.0) > clip_eps).astype(ratio.dtype)),
    ]).mean(axis=-1)
    loss = policy_loss + vf_coef * value_loss - ent_coef * mean_entropy
    return loss, LossInfo(policy_loss, value_loss, mean_entropy, approx_kl, clip_frac)


def ppo_term(policy, clip_value: bool) -> LossTerm:
    """PPO's loss (`ppo_loss`) as a `LossTerm`, the first of those `make_ppo`'s learner sums.

    Args:
        policy: the `ActionDistribution` that `outputs[0]` parameterizes (`log_prob`,
            `entropy`).
        clip_value: clip the value loss as `ppo_loss` does.

    Returns:
        The term: its loss is the clipped surrogate, plus `hparams.vf_coef` times the value
            loss, minus `hparams.ent_coef` times the entropy, with `hparams.clip_eps`; its
            metrics are `LossInfo`'s fields (`policy_loss`, `value_loss`, `entropy`,
            `approx_kl`, `clip_frac`), logged as `loss/<name>`; the target-KL stop
            (`purerl.algos.learner.target_kl_stop`) reads `loss/approx_kl`.
    """
    def term(params, batch, outputs, hparams):
        del params  # the outputs are all it needs
        policy_out, value = outputs[:2]
        loss, info = ppo_loss(
            policy.log_prob(policy_out, batch.action), policy.entropy(policy_out), value,
            batch.log_prob, batch.value, batch.advantages, batch.returns,
            clip_eps=hparams.clip_eps, vf_coef=hparams.vf_coef, ent_coef=hparams.ent_coef,
            clip_value=clip_value)
        return loss, info._asdict()

    return term


def normalize_advantages(advantages: jax.Array, axis_name: Optional[str] = None) -> jax.Array:
    """(A - mean) / (std + 1e-8) over the last axis (a minibatch: `[..., N]`), with the
    statistics pooled across `axis_name` devices. The variance is that of A - mean, the pooled
    mean subtracted first: E[A^2] - E[A]^2 in float32 loses every digit once |mean| / std
    passes about 1e3 (large rewards, a value function behind).

    Args:
        advantages: float `[..., N]`.
        axis_name: the device axis whose samples the statistics pool; None on one device.

    Returns:
        The normalized advantages `[..., N]`.
    """
    def pooled_mean(x):
        x = x.mean(axis=-1, keepdims=True)
        return x if axis_name is None else jax.lax.pmean(x, axis_name)

    centered = advantages - pooled_mean(advantages)
    return centered / (jnp.sqrt(pooled_mean(jnp.square(centered))) + 1e-8)
