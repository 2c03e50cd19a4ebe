import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import spaces

from purerl.envs.action_spaces import MultiDiscrete, analyze_action_space
from purerl.nets.distributions import (
    ActionDistribution,
    categorical_entropy,
    categorical_log_prob,
    categorical_mode,
)

P = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
LOGITS = jnp.log(jnp.array(P))


def test_categorical_closed_forms():
    np.testing.assert_allclose(categorical_log_prob(LOGITS, jnp.array([2, 0])), np.log([0.5, 0.6]),
                               rtol=1e-6)
    np.testing.assert_allclose(categorical_entropy(LOGITS), -(P * np.log(P)).sum(-1), rtol=1e-6)
    np.testing.assert_array_equal(categorical_mode(LOGITS), [2, 0])


def test_factorized_categorical_sums_over_controls():
    dist = ActionDistribution(analyze_action_space(MultiDiscrete([2, 3])))
    p0, p1 = np.array([0.25, 0.75]), np.array([0.2, 0.3, 0.5])
    logits = jnp.log(jnp.concatenate([p0, p1]))[None]
    action = jnp.array([[1, 2]])
    np.testing.assert_allclose(dist.log_prob(logits, action), [np.log(0.75 * 0.5)], rtol=1e-6)
    entropy = -(p0 * np.log(p0)).sum() - (p1 * np.log(p1)).sum()
    np.testing.assert_allclose(dist.entropy(logits), [entropy], rtol=1e-6)
    np.testing.assert_array_equal(dist.mode(logits), [[1, 2]])


def _frequencies(dist, logits, temperature, n=40_000):
    noise = dist.noise(jax.random.key(0), (n,))
    actions = dist.sample(jnp.broadcast_to(logits, (n, logits.shape[-1])), noise, temperature)
    return np.bincount(np.asarray(actions[:, 0]), minlength=logits.shape[-1]) / n


def test_categorical_sampling_and_temperature():
    dist = ActionDistribution(analyze_action_space(spaces.Discrete(3)))
    np.testing.assert_allclose(_frequencies(dist, LOGITS[0], 1.0), P[0], atol=0.01)
    sharp = P[0] ** 2 / (P[0] ** 2).sum()  # softmax(logits / 0.5)
    np.testing.assert_allclose(_frequencies(dist, LOGITS[0], 0.5), sharp, atol=0.01)
    np.testing.assert_allclose(_frequencies(dist, LOGITS[0], 0.0), [0, 0, 1])  # the mode


def test_gaussian_closed_forms_and_temperature():
    dist = ActionDistribution(analyze_action_space(spaces.Box(-1.0, 1.0, (2,))))
    mean, log_std = jnp.array([[0.5, -1.0]]), jnp.log(jnp.array([[2.0, 0.5]]))
    action = jnp.array([[1.5, 0.0]])  # outside the Box: the log-prob is of the unclipped action
    z = np.array([(1.5 - 0.5) / 2.0, (0.0 + 1.0) / 0.5])
    expected = (-0.5 * z**2 - np.log([2.0, 0.5]) - 0.5 * math.log(2 * math.pi)).sum()
    np.testing.assert_allclose(dist.log_prob((mean, log_std), action), [expected], rtol=1e-6)
    expected_entropy = (np.log([2.0, 0.5]) + 0.5 * math.log(2 * math.pi * math.e)).sum()
    np.testing.assert_allclose(dist.entropy((mean, log_std)), [expected_entropy], rtol=1e-6)
    noise = dist.noise(jax.random.key(1), (50_000,))
    out = (jnp.broadcast_to(mean, (50_000, 2)), jnp.broadcast_to(log_std, (50_000, 2)))
    for tau in (1.0, 0.5):
        samples = np.asarray(dist.sample(out, noise, tau))
        np.testing.assert_allclose(samples.std(axis=0), tau * np.array([2.0, 0.5]), rtol=0.02)
        np.testing.assert_allclose(samples.mean(axis=0), [0.5, -1.0], atol=0.03)
    np.testing.assert_array_equal(dist.sample(out, noise, 0.0)[:2], np.broadcast_to(mean, (2, 2)))
    np.testing.assert_array_equal(dist.mode((mean, log_std)), mean)


@pytest.mark.parametrize("num_choices", [2, 5, 8, 9, 20])
def test_categorical_reductions_match_jax_for_few_and_many_choices(num_choices):
    """Up to UNROLLED_MAX_CHOICES the reductions over the choices are written column by column;
    both ways must agree with jax.nn / jnp, ties included (the first maximal index wins)."""
    from purerl.nets.distributions import categorical_log_softmax

    logits = jax.random.normal(jax.random.key(num_choices), (64, num_choices)) * 3.0
    logits = logits.at[0].set(1.0)  # all tied
    action = jax.random.randint(jax.random.key(1), (64,), 0, num_choices)
    log_probs = jax.nn.log_softmax(logits)
    np.testing.assert_allclose(categorical_log_softmax(logits), log_probs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(categorical_log_prob(logits, action),
                               jnp.take_along_axis(log_probs, action[:, None], -1)[:, 0],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(categorical_entropy(logits),
                               -(jnp.exp(log_probs) * log_probs).sum(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(categorical_mode(logits), jnp.argmax(logits, -1))
    grad = jax.grad(lambda x: categorical_log_prob(x, action).sum())(logits)
    np.testing.assert_allclose(grad, jax.nn.one_hot(action, num_choices) - jnp.exp(log_probs),
                               rtol=1e-5, atol=1e-6)


def test_masked_categorical_is_the_categorical_of_the_legal_actions():
    dist = ActionDistribution(analyze_action_space(spaces.Discrete(3)))
    mask = jnp.array([[True, False, True], [False, True, True]])
    masked = dist.masked(LOGITS, mask)
    legal = np.where(np.asarray(mask), P, 0.0)
    legal /= legal.sum(-1, keepdims=True)  # the legal actions' renormalized probabilities
    np.testing.assert_allclose(dist.log_prob(masked, jnp.array([[2], [1]])),
                               np.log([legal[0, 2], legal[1, 1]]), rtol=1e-6)
    np.testing.assert_allclose(dist.entropy(masked),
                               [-(q[q > 0] * np.log(q[q > 0])).sum() for q in legal], rtol=1e-6)
    assert np.isfinite(np.asarray(dist.entropy(masked))).all()
    np.testing.assert_allclose(_frequencies(dist, masked[0], 1.0), legal[0], atol=0.01)
    np.testing.assert_array_equal(_frequencies(dist, masked[1], 0.0), [0, 1, 0])
    # no gradient reaches an illegal action's logit
    grad = jax.grad(lambda z: dist.entropy(dist.masked(z, mask)).sum())(LOGITS)
    np.testing.assert_array_equal(np.asarray(grad)[~np.asarray(mask)], 0.0)
