"""Environments of a user's own, loaded through env.name=custom_envs:<attr>."""

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from examples.my_env import Slider
from purerl.envs.suites.base import SuiteEnv


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


@struct.dataclass
class BanditState(environment.EnvState):
    target: jax.Array
    time: int


@struct.dataclass
class BanditParams(environment.EnvParams):
    max_steps_in_episode: int = 1


class ComboLock(environment.Environment):
    """One-step episodes: the observation shows a target combination (one-hot per control);
    the reward is the share of controls set to it. Controls have 2, 3 and 4 choices."""

    nvec = (2, 3, 4)

    def __init__(self, as_tuple: bool = False):
        super().__init__()
        self.as_tuple = as_tuple

    @property
    def default_params(self):
        return BanditParams()

    def step_env(self, key, state, action, params):
        action = jnp.stack(action) if self.as_tuple else action
        reward = jnp.mean((action == state.target).astype(jnp.float32))
        state = state.replace(time=state.time + 1)
        return self.get_obs(state), state, reward, jnp.bool_(True), {}

    def reset_env(self, key, params):
        keys = jax.random.split(key, len(self.nvec))
        target = jnp.stack([jax.random.randint(k, (), 0, n) for k, n in zip(keys, self.nvec)])
        state = BanditState(target=target, time=0)
        return self.get_obs(state), state

    def get_obs(self, state, params=None, key=None):
        return jnp.concatenate([jax.nn.one_hot(state.target[i], n)
                                for i, n in enumerate(self.nvec)])

    def action_space(self, params=None):
        from purerl.envs.action_spaces import MultiDiscrete

        if self.as_tuple:
            return spaces.Tuple([spaces.Discrete(n) for n in self.nvec])
        return MultiDiscrete(self.nvec)

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (sum(self.nvec),), jnp.float32)


def combo_lock_tuple():
    return ComboLock(as_tuple=True)


class Reach(environment.Environment):
    """One-step episodes: the observation is a target in [-1, 1]^2; the action (Box [-2, 2]^2)
    is rewarded by minus its squared distance to the target."""

    @property
    def default_params(self):
        return BanditParams()

    def step_env(self, key, state, action, params):
        reward = -jnp.sum(jnp.square(action - state.target))
        state = state.replace(time=state.time + 1)
        return self.get_obs(state), state, reward, jnp.bool_(True), {}

    def reset_env(self, key, params):
        state = BanditState(target=jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0), time=0)
        return self.get_obs(state), state

    def get_obs(self, state, params=None, key=None):
        return state.target

    def action_space(self, params=None):
        return spaces.Box(-2.0, 2.0, (2,), jnp.float32)

    def observation_space(self, params):
        return spaces.Box(-1.0, 1.0, (2,), jnp.float32)


class DictActions(Reach):
    def action_space(self, params=None):
        return spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Discrete(3)})


class UnboundedBox(Reach):
    def action_space(self, params=None):
        return spaces.Box(-jnp.inf, jnp.inf, (2,), jnp.float32)


@struct.dataclass
class NoisyObsState(environment.EnvState):
    time: int


class NoisyObs(environment.Environment):
    """Observations drawn i.i.d. from N(OBS_MEAN, OBS_STD^2) at every step and reset; reward 1
    per step whatever the action; every episode is truncated after `max_steps_in_episode`."""

    OBS_MEAN = (3.0, -2.0)
    OBS_STD = (0.5, 4.0)

    @property
    def default_params(self):
        return environment.EnvParams(max_steps_in_episode=10)

    def _obs(self, key):
        noise = jax.random.normal(key, (2,))
        return jnp.asarray(self.OBS_MEAN) + jnp.asarray(self.OBS_STD) * noise

    def step_env(self, key, state, action, params):
        state = NoisyObsState(time=state.time + 1)
        return self._obs(key), state, jnp.float32(1.0), jnp.bool_(False), {}

    def reset_env(self, key, params):
        return self._obs(key), NoisyObsState(time=0)

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def observation_space(self, params):
        return spaces.Box(-jnp.inf, jnp.inf, (2,), jnp.float32)


class NaNChain(Chain):
    """Chain whose reward is NaN with probability 0.0002 per step: the NaN guard's test."""

    def step_env(self, key, state, action, params):
        obs, state, reward, terminated, info = super().step_env(key, state, action, params)
        reward = jnp.where(jax.random.uniform(key) < 0.0002, jnp.nan, reward)
        return obs, state, reward, terminated, info


@struct.dataclass
class RecallState(environment.EnvState):
    cue: jax.Array  # int32, 0 or 1
    time: int


@struct.dataclass
class RecallParams(environment.EnvParams):
    delay: int = 2  # blank steps between the cue and the answer
    max_steps_in_episode: int = 10


class Recall(environment.Environment):
    """A memory test: the first observation shows a random cue (-1 or +1), the next `delay`
    show nothing; the episode's last action (step `delay + 1`) earns 1 if it names the cue
    (action 1 for +1, 0 for -1). Observations `[cue or 0, answer step]`. A policy without memory
    is right half the time (expected return 0.5); one that remembers, always (1.0)."""

    @property
    def default_params(self):
        return RecallParams()

    def step_env(self, key, state, action, params):
        answering = state.time == params.delay
        reward = jnp.where(answering & (action == state.cue), 1.0, 0.0)
        state = RecallState(cue=state.cue, time=state.time + 1)
        return self.get_obs(state, params), state, reward, answering, {}

    def reset_env(self, key, params):
        state = RecallState(cue=jax.random.bernoulli(key).astype(jnp.int32), time=jnp.int32(0))
        return self.get_obs(state, params), state

    def get_obs(self, state, params=None, key=None):
        params = self.default_params if params is None else params
        cue = jnp.where(state.time == 0, 2.0 * state.cue - 1.0, 0.0)
        return jnp.stack([cue, jnp.float32(state.time == params.delay)])

    def observation_space(self, params):
        return spaces.Box(-1.0, 1.0, (2,), jnp.float32)

    def action_space(self, params=None):
        return spaces.Discrete(2)


class AlternatingMask(SuiteEnv):
    """A SuiteEnv with an action mask: of 4 actions, 1 and 3 are legal on even steps, 0 and 2
    on odd ones; action 0 earns 1, an illegal action -10 (so a return below 0 means one was
    taken). 10 steps, so the best return is 5."""

    suite_name = "custom"
    action_mask_size = 4

    def __init__(self, mask_size: int = 4):
        self.action_mask_size = mask_size
        super().__init__("alternating", spaces.Discrete(4), 10)

    def suite_reset(self, key):
        return jnp.zeros(2), jnp.int32(0)

    def suite_step(self, key, time, action):
        legal = self.legal(time)[action]
        reward = jnp.where(legal, (action == 0).astype(jnp.float32), -10.0)
        return jnp.full(2, time + 1.0), time + 1, reward, False, False

    @staticmethod
    def legal(time):
        return jnp.array([False, True, False, True]) ^ (time % 2 == 1)

    def suite_action_mask(self, time):
        return jnp.resize(self.legal(time), (self.action_mask_size,))


def mask_of_three():
    return AlternatingMask(mask_size=3)


class RandomStart(SuiteEnv):
    """A SuiteEnv whose every episode starts at a random point `[2]` and lasts 3 steps (then a
    time limit), standing still: each episode's observations are its start."""

    suite_name = "custom"

    def __init__(self):
        super().__init__("random-start", spaces.Discrete(2), 3)

    def suite_reset(self, key):
        start = jax.random.uniform(key, (2,))
        return start, start

    def suite_step(self, key, start, action):
        return start, start, jnp.float32(0.0), False, False


class FoldedSlider(Slider):
    """examples/my_env.py's Slider as pre-1.0 gymnax code writes an env: the time limit folded
    into `terminated`."""

    def step_env(self, key, state, action, params):
        obs, state, reward, terminated, info = super().step_env(key, state, action, params)
        return obs, state, reward, terminated | (state.time >= params.max_steps_in_episode), info
