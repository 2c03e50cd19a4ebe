import jax.numpy as jnp
import numpy as np
import pytest

from purerl.core.losses import normalize_advantages, ppo_loss

OLD_LOG_PROB = jnp.array([-0.7, -1.2])
INPUTS = dict(
    log_prob=OLD_LOG_PROB + jnp.log(jnp.array([1.5, 0.5])),  # ratios 1.5 and 0.5
    entropy=jnp.array([0.6, 0.4]),
    value=jnp.array([1.0, 0.0]),
    old_log_prob=OLD_LOG_PROB,
    old_value=jnp.array([0.5, 0.5]),
    advantages=jnp.array([1.0, -1.0]),
    returns=jnp.array([2.0, 0.0]),
)


def test_hand_checked_values_with_value_clipping():
    loss, info = ppo_loss(**INPUTS, clip_eps=0.2, vf_coef=0.5, ent_coef=0.01, clip_value=True)
    # surrogate: min(1.5 * 1, 1.2 * 1) = 1.2 and min(0.5 * -1, 0.8 * -1) = -0.8
    assert info.policy_loss == pytest.approx(-(1.2 - 0.8) / 2)
    # clipped values 0.7 and 0.3: max((1-2)^2, (0.7-2)^2) = 1.69, max(0, 0.09) = 0.09
    assert info.value_loss == pytest.approx(0.5 * (1.69 + 0.09) / 2)
    assert info.entropy == pytest.approx(0.5)
    kl = ((0.5 - np.log(1.5)) + (-0.5 - np.log(0.5))) / 2
    assert info.approx_kl == pytest.approx(kl, rel=1e-5)
    assert info.clip_frac == pytest.approx(1.0)
    assert loss == pytest.approx(-0.2 + 0.5 * 0.445 - 0.01 * 0.5, rel=1e-5)


def test_unclipped_value_loss():
    _, info = ppo_loss(**INPUTS, clip_eps=0.2, vf_coef=0.5, ent_coef=0.01, clip_value=False)
    assert info.value_loss == pytest.approx(0.5 * (1.0 + 0.0) / 2)


def test_unchanged_policy_has_zero_kl_and_no_clipping():
    inputs = {**INPUTS, "log_prob": OLD_LOG_PROB}
    _, info = ppo_loss(**inputs, clip_eps=0.2, vf_coef=0.5, ent_coef=0.0, clip_value=True)
    assert info.approx_kl == 0.0 and info.clip_frac == 0.0
    assert info.policy_loss == pytest.approx(0.0)  # mean advantage is 0


def test_normalize_advantages():
    out = normalize_advantages(jnp.array([1.0, 2.0, 3.0, 6.0]))
    assert float(out.mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(out.std()) == pytest.approx(1.0, rel=1e-5)


def test_normalize_advantages_far_from_zero_alone_and_pooled():
    """A minibatch of 512 with std 1 around a mean of 1e4 (large unnormalized rewards, a value
    function behind) normalizes as numpy does in float64, alone and pooled over 2 devices
    (`vmap` with an axis name: the statistics of both halves)."""
    import jax
    import numpy as np

    draws = np.random.default_rng(0).standard_normal(512)
    advantages = (1e4 + draws).astype(np.float32)
    pooled = np.asarray(advantages, np.float64)
    expected = (pooled - pooled.mean()) / (pooled.std() + 1e-8)
    alone = np.asarray(normalize_advantages(jnp.asarray(advantages)))
    halves = jax.vmap(lambda a: normalize_advantages(a, "devices"), axis_name="devices")(
        jnp.asarray(advantages).reshape(2, 256))
    for out in (alone, np.asarray(halves).reshape(-1)):
        np.testing.assert_allclose(out, expected, atol=2e-3)
        assert abs(out.std() - 1.0) < 1e-3
