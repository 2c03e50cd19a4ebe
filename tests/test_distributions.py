import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purerl import distributions as dist

LOGITS = jnp.log(jnp.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]))


def test_log_prob_and_entropy_closed_form():
    p = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    np.testing.assert_allclose(dist.categorical_log_prob(LOGITS, jnp.array([2, 0])),
                               np.log([0.5, 0.6]), rtol=1e-6)
    np.testing.assert_allclose(dist.categorical_entropy(LOGITS), -(p * np.log(p)).sum(-1),
                               rtol=1e-6)


def test_mode_and_zero_temperature():
    np.testing.assert_array_equal(dist.categorical_mode(LOGITS), [2, 0])
    np.testing.assert_array_equal(dist.categorical_sample(jax.random.key(0), LOGITS, 0.0), [2, 0])


def test_sampling_frequencies_and_temperature():
    logits = jnp.broadcast_to(LOGITS[0], (40_000, 3))
    freq = np.bincount(np.asarray(dist.categorical_sample(jax.random.key(0), logits)), minlength=3)
    np.testing.assert_allclose(freq / 40_000, [0.2, 0.3, 0.5], atol=0.01)
    hot = np.bincount(np.asarray(dist.categorical_sample(jax.random.key(1), logits, 0.5)),
                      minlength=3) / 40_000
    expected = np.array([0.2, 0.3, 0.5]) ** 2
    np.testing.assert_allclose(hot, expected / expected.sum(), atol=0.01)
