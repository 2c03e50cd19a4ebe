"""Environments of a user's own, loaded through env.name=custom_envs:<attr>."""

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class ChainState(environment.EnvState):
    position: jax.Array
    time: int


@struct.dataclass
class ChainParams(environment.EnvParams):
    length: int = 4
    max_steps_in_episode: int = 10


class Chain(environment.Environment):
    """Walk right (action 1) to reach the end of a chain for reward 1; left does nothing."""

    @property
    def default_params(self):
        return ChainParams()

    def step_env(self, key, state, action, params):
        position = state.position + action
        state = ChainState(position=position, time=state.time + 1)
        terminated = position >= params.length
        return self.get_obs(state), state, terminated.astype(jnp.float32), terminated, {}

    def reset_env(self, key, params):
        state = ChainState(position=jnp.int32(0), time=0)
        return self.get_obs(state), state

    def get_obs(self, state, params=None, key=None):
        return jax.nn.one_hot(state.position, 5)

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (5,), jnp.float32)


def make_short_chain():
    """A factory returning (env, env_params)."""
    return Chain(), ChainParams(length=2)


def not_an_env():
    return 42
