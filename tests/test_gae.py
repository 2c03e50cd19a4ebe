import jax.numpy as jnp
import numpy as np
import pytest

from purerl import compute_gae


def numpy_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Reference: an explicit backward loop over time for each env."""
    T, B = rewards.shape
    adv = np.zeros((T, B))
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, b] else gamma * next_values[t, b]
            delta = rewards[t, b] + bootstrap - values[t, b]
            if terminated[t, b] or truncated[t, b]:
                running = 0.0
            running = delta + gamma * lam * running
            adv[t, b] = running
    return adv, adv + values


R = np.array([[1.0], [1.0], [1.0]])
V = np.array([[0.5], [0.4], [0.3]])
NV = np.array([[0.4], [0.3], [0.2]])
NONE = np.zeros((3, 1), bool)
AT_1 = np.array([[False], [True], [False]])


@pytest.mark.parametrize("terminated, truncated, expected", [
    # no episode end: A2 = .88, A1 = .87 + .72 * .88, A0 = .86 + .72 * A1
    (NONE, NONE, [1.942592, 1.5036, 0.88]),
    # terminated at t=1: no bootstrap there (delta1 = 1 - .4) and the recursion stops
    (AT_1, NONE, [0.86 + 0.72 * 0.6, 0.6, 0.88]),
    # truncated at t=1: bootstraps from next_values[1] (delta1 = .87), recursion stops
    (NONE, AT_1, [0.86 + 0.72 * 0.87, 0.87, 0.88]),
    # both at once: termination wins, no bootstrap
    (AT_1, AT_1, [0.86 + 0.72 * 0.6, 0.6, 0.88]),
])
def test_hand_computed(terminated, truncated, expected):
    adv, ret = compute_gae(jnp.array(R), jnp.array(V), jnp.array(NV), jnp.array(terminated),
                           jnp.array(truncated), gamma=0.9, gae_lambda=0.8)
    np.testing.assert_allclose(np.asarray(adv)[:, 0], expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ret), np.asarray(adv) + V, rtol=1e-6)


@pytest.mark.parametrize("flag_dtype", [bool, np.float32])
def test_against_numpy_loop(flag_dtype):
    rng = np.random.default_rng(0)
    T, B = 37, 5
    rewards = rng.normal(size=(T, B))
    values, next_values = rng.normal(size=(T, B)), rng.normal(size=(T, B))
    terminated = rng.random((T, B)) < 0.1
    truncated = rng.random((T, B)) < 0.15
    truncated[3, 1] = terminated[3, 1] = True  # a step that is both
    assert (terminated & truncated).any()
    expected_adv, expected_ret = numpy_gae(rewards, values, next_values, terminated, truncated,
                                           0.97, 0.9)
    adv, ret = compute_gae(
        *(jnp.asarray(x, jnp.float32) for x in (rewards, values, next_values)),
        jnp.asarray(terminated.astype(flag_dtype)), jnp.asarray(truncated.astype(flag_dtype)),
        gamma=0.97, gae_lambda=0.9,
    )
    np.testing.assert_allclose(adv, expected_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, expected_ret, rtol=1e-5, atol=1e-5)


def test_rejects_wrong_rank():
    x = jnp.zeros((4,))
    with pytest.raises(AssertionError):
        compute_gae(x, x, x, x, x, gamma=0.9, gae_lambda=0.9)
