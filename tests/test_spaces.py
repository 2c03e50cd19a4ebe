import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import spaces

from purerl.envs.action_spaces import (
    ActionSpec,
    MultiDiscrete,
    UnsupportedSpaceError,
    analyze_action_space,
)


def test_discrete():
    spec = analyze_action_space(spaces.Discrete(3))
    assert spec == ActionSpec("categorical", num_choices=(3,))
    assert (spec.num_controls, spec.num_outputs) == (1, 3)
    np.testing.assert_array_equal(spec.to_env(jnp.array([[2], [0]])), [2, 0])


def test_multidiscrete_equal_choices_gives_controls_and_choices():
    """trax's case: MultiDiscrete with equal categories is (controls, choices)."""
    spec = analyze_action_space(MultiDiscrete([5, 5, 5]))
    assert (spec.num_controls, spec.num_choices[0]) == (3, 5)
    assert set(spec.num_choices) == {5} and spec.num_outputs == 15


def test_multidiscrete_unequal_and_tuple():
    spec = analyze_action_space(MultiDiscrete([2, 3, 4]))
    assert spec.num_choices == (2, 3, 4) and spec.shape == (3,) and not spec.as_tuple
    tuple_spec = analyze_action_space(spaces.Tuple([spaces.Discrete(2), spaces.Discrete(3)]))
    assert tuple_spec.num_choices == (2, 3) and tuple_spec.as_tuple
    env_action = tuple_spec.to_env(jnp.array([[1, 2], [0, 1]]))
    assert isinstance(env_action, tuple) and len(env_action) == 2
    np.testing.assert_array_equal(env_action[1], [2, 1])


def test_multidiscrete_space_samples_in_range():
    space = MultiDiscrete([2, 3, 4])
    samples = jax.vmap(space.sample)(jax.random.split(jax.random.key(0), 1000))
    assert samples.shape == (1000, 3) and samples.dtype == jnp.int32
    np.testing.assert_array_equal(samples.max(axis=0), [1, 2, 3])
    assert bool(space.contains(jnp.array([1, 2, 3])))
    assert not bool(space.contains(jnp.array([2, 0, 0])))


def test_box_is_gaussian_and_clipped_for_the_env():
    spec = analyze_action_space(spaces.Box(jnp.array([-1.0, 0.0]), jnp.array([1.0, 2.0]), (2,)))
    assert spec.kind == "gaussian" and spec.num_outputs == 2
    assert spec.low == (-1.0, 0.0) and spec.high == (1.0, 2.0)
    np.testing.assert_allclose(spec.to_env(jnp.array([[3.0, -3.0]])), [[1.0, 0.0]])
    matrix = analyze_action_space(spaces.Box(-1.0, 1.0, (2, 3)))
    assert matrix.num_controls == 6 and matrix.to_env(jnp.zeros((4, 6))).shape == (4, 2, 3)


@pytest.mark.parametrize("space, message", [
    (spaces.Dict({"a": spaces.Discrete(2)}), "Dict"),
    (spaces.Tuple([spaces.Tuple([spaces.Discrete(2)])]), "only a Tuple of Discrete"),
    (spaces.Tuple([spaces.Discrete(2), spaces.Box(-1.0, 1.0, (1,))]), "only a Tuple of Discrete"),
    (spaces.Box(-jnp.inf, jnp.inf, (2,)), "infinite bounds"),
    (spaces.Discrete(0), "no choices"),
])
def test_unsupported_spaces_name_the_space(space, message):
    with pytest.raises(UnsupportedSpaceError, match=message):
        analyze_action_space(space)
