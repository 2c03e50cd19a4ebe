"""Environments of your own: gymnax 1.0 `Environment` subclasses, one with Discrete actions and
one with Box actions.

    python -m purerl.train +env=gymnax env.name=examples.my_env:Corridor
    python -m purerl.train +env=gymnax env.name=examples.my_env:Slider \\
        env.params.max_steps_in_episode=50

`step_env` returns `(obs, state, reward, terminated, info)`, where `terminated` is the task's
own end only (the goal reached). The time limit is gymnax's: `Environment.step` truncates the
episode once `state.time >= params.max_steps_in_episode` (`is_truncated`), and purerl
bootstraps a truncated episode's value from its last observation. Count `time` up in
`step_env` and leave the limit out of `terminated`.
"""

from __future__ import annotations

# --8<-- [start:corridor]
import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class CorridorState(environment.EnvState):
    position: jax.Array  # the cell, 0 .. length - 1
    goal: jax.Array  # the goal's end: 0 or length - 1
    time: int


@struct.dataclass
class CorridorParams(environment.EnvParams):
    length: int = 9
    max_steps_in_episode: int = 20


class Corridor(environment.Environment[CorridorState, CorridorParams]):
    """A corridor of `length` cells, the walker in the middle and the goal at one end, drawn at
    each reset and shown in the observation: step left (0) or right (1); reward 1 and the end
    of the episode at the goal. An episode that reaches the goal in the fewest steps returns 1;
    one that wanders past `max_steps_in_episode` is truncated with return 0."""

    @property
    def default_params(self) -> CorridorParams:
        return CorridorParams()

    def step_env(self, key, state, action, params):
        position = jnp.clip(state.position + 2 * action - 1, 0, params.length - 1)
        state = state.replace(position=position, time=state.time + 1)
        terminated = position == state.goal  # the goal only: the time limit is gymnax's
        return self._obs(state, params), state, terminated.astype(jnp.float32), terminated, {}

    def reset_env(self, key, params):
        goal = jnp.where(jax.random.bernoulli(key), params.length - 1, 0)
        state = CorridorState(position=jnp.int32(params.length // 2), goal=goal.astype(jnp.int32),
                              time=0)
        return self._obs(state, params), state

    def _obs(self, state, params):
        """The position and the goal's end, each scaled to [-1, 1]."""
        scale = 2.0 / (params.length - 1)
        return jnp.stack([state.position * scale - 1.0, state.goal * scale - 1.0])

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def observation_space(self, params):
        return spaces.Box(-1.0, 1.0, (2,), jnp.float32)
# --8<-- [end:corridor]


@struct.dataclass
class SliderState(environment.EnvState):
    x: jax.Array
    target: jax.Array
    time: int


@struct.dataclass
class SliderParams(environment.EnvParams):
    speed: float = 0.2  # the most the slider moves in a step
    tolerance: float = 0.1  # how close to the target ends the episode
    max_steps_in_episode: int = 30


class Slider(environment.Environment[SliderState, SliderParams]):
    """A slider on [-1, 1] starts at 0 and moves by `speed * action` (an action in [-1, 1],
    which purerl clips a Gaussian policy's sample to) towards a target drawn at each reset:
    reward 1 and the end of the episode within `tolerance` of it, else the distance's
    negative, a step cost that a quick reach keeps small."""

    @property
    def default_params(self) -> SliderParams:
        return SliderParams()

    def step_env(self, key, state, action, params):
        x = jnp.clip(state.x + params.speed * action[0], -1.0, 1.0)
        state = state.replace(x=x, time=state.time + 1)
        distance = jnp.abs(x - state.target)
        terminated = distance < params.tolerance  # the target only: the time limit is gymnax's
        reward = jnp.where(terminated, 1.0, -distance)
        return self._obs(state), state, reward, terminated, {}

    def reset_env(self, key, params):
        state = SliderState(x=jnp.float32(0.0), target=jax.random.uniform(key, (), jnp.float32,
                                                                         -1.0, 1.0), time=0)
        return self._obs(state), state

    def _obs(self, state):
        return jnp.stack([state.x, state.target])

    def action_space(self, params=None):
        return spaces.Box(-1.0, 1.0, (1,), jnp.float32)

    def observation_space(self, params):
        return spaces.Box(-1.0, 1.0, (2,), jnp.float32)
