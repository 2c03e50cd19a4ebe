"""JaxMARL's multi-agent envs: `env.name=jaxmarl/<id>`, `<id>` one of
`jaxmarl.registered_envs` (`MPE_simple_spread_v3`, `overcooked`, `HeuristicEnemySMAX`, ...),
made by `jaxmarl.make(<id>, **kwargs)`; a user's own `MultiAgentEnv` by `env.name=module:attr`.

The env's agents become an axis: one env's observations are `[A, ...]`, its rewards `[A]`, its
action `[A]`, in the order of `env.agents` (`agent_names`). The trainer folds the agents into
its batch (`purerl.nets.multi_agent`), so one policy acts for every agent (parameter sharing).

Construction: the keywords JaxMARL's constructors take come from `env.params`, and are not
the env params' fields (a JaxMARL env holds its settings itself): `layout=<name>` for
Overcooked (a key of `overcooked_layouts`), `map=<name>` for the SMAX envs (a map of
`map_name_to_scenario`), any other keyword as it is (`env.params.max_steps=50`). Only
`max_steps_in_episode` is purerl's own, its time limit.

Signals: JaxMARL's `step_env` (the step without its auto-reset; purerl resets itself) gives
`dones` per agent and `"__all__"`. The episode ends on `"__all__"`: at the env's own step
limit (`env.max_steps`: MPE's 25, Overcooked's 400, SMAX's 100) it is `truncated` (bootstrap;
MPE and Overcooked end only there), else `terminated` (SMAX's battle won or lost). purerl's
own limit, `max_steps_in_episode` (the env's `max_steps` by default, else 1000), truncates
too. An agent's own done (a dead SMAX unit) ends nothing: the agent stays in the episode,
paid what the env pays it until the episode ends (SMAX pays dead units the team's reward).

Observations: each agent's array as JaxMARL gives it, cast to float32. Images (Overcooked's
`[4, 5, 26]`, read from the array: its `observation_space` says `[5, 4, 26]`) keep their
shape; vectors of different sizes (MPE's speaker and listener) are zero-padded to the
largest. An env whose agents have action masks (`get_avail_actions`: SMAX), or whose agents'
numbers of actions differ (padded to the largest, the padding illegal), appends each agent's
mask to its vector as its last entries, as single-agent masks are. Actions: `Discrete(n)`
per agent. For a central critic (`with_global_state`), every agent's vector starts with the
global state: SMAX's `world_state`, else every agent's observation concatenated. SMAX's
outcome is `info["won"]`: 1 where the episode's last step left every enemy
dead and an ally alive.
"""

from __future__ import annotations

import importlib
import math
from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
import jaxmarl
import numpy as np
from flax import struct
from gymnax.environments import spaces
from jaxmarl.environments.multi_agent_env import MultiAgentEnv

from purerl.config import ConfigError, EnvConfig
from purerl.envs.suites.base import SuiteEnv, SuiteParams, SuiteState, close_matches, one_line
from purerl.envs.wrappers import SCORE_REWARD

# purerl's time limit for an env without `max_steps` of its own
DEFAULT_MAX_STEPS = 1000

# `env.params` keys that name a JaxMARL object, not a value: key -> (the constructor's
# keyword, the module and dict of named objects, the envs it applies to)
NAMED_ARGUMENTS = {
    "layout": ("layout", "jaxmarl.environments.overcooked", "overcooked_layouts"),
    "map": ("scenario", "jaxmarl.environments.smax.smax_env", "MAP_NAME_TO_SCENARIO"),
}


@struct.dataclass
class JaxMARLParams(SuiteParams):
    """`SuiteParams` and the weight of the env's shaped reward (`info["shaped_reward"]`,
    Overcooked's) in the step's reward; the trainer anneals it over
    `env.reward_shaping_horizon` env steps, evaluation keeps it 0."""

    shaped_reward_weight: float = 0.0


class JaxMARLEnv(SuiteEnv):
    """A JaxMARL `MultiAgentEnv` as one env with an agent axis `[A]`."""

    suite_name = "jaxmarl"

    def __init__(self, env_id: str, env: Any, constructor_params: Tuple[str, ...] = (),
                 global_state: bool = False):
        self.env = env
        # the `env.params` keys that made the env (not fields of its params)
        self.constructor_params = constructor_params
        self.agent_names: Tuple[str, ...] = tuple(env.agents)
        # each agent's group of `agent_classes`, for separate parameters per group
        self.agent_groups = _agent_groups(env, self.agent_names)
        # > 0: every agent's observation starts with the global state, this long
        self.global_state_size = _global_state_size(env_id, env) if global_state else 0
        action_spaces = [env.action_space(name) for name in self.agent_names]
        if not all(hasattr(space, "n") for space in action_spaces):
            raise ConfigError(
                f"env.name='jaxmarl/{env_id}': purerl's multi-agent envs take Discrete actions; "
                f"this env's are {', '.join(sorted({type(s).__name__ for s in action_spaces}))}")
        self.agent_num_actions = tuple(int(space.n) for space in action_spaces)
        num_actions = max(self.agent_num_actions)
        self.has_avail_actions = _has_avail_actions(env)
        masked = self.has_avail_actions or len(set(self.agent_num_actions)) > 1
        self.action_mask_size = num_actions if masked else 0
        self.reward_shape = (len(self.agent_names),)
        # what the step's info reports of an episode on its last step, besides the returns
        self.info_outcomes: Tuple[str, ...] = ("won",) if _is_smax(env) else ()
        # the env's own step limit, which it reports as `"__all__"`; None: it has none
        self.own_limit = int(env.max_steps) if hasattr(env, "max_steps") else None
        super().__init__(env_id, spaces.Discrete(num_actions),
                         self.own_limit or DEFAULT_MAX_STEPS)

    def with_global_state(self) -> "JaxMARLEnv":
        """This env with the global state first in every agent's observation (what a central
        critic reads, `marl.critic=central`): SMAX's `world_state`, else every agent's
        observation, concatenated.

        Returns:
            The `JaxMARLEnv`, its observations `[A, global_state_size + D]`.

        Raises:
            ConfigError: the agents' observations are images.
        """
        return JaxMARLEnv(self.env_id, self.env, self.constructor_params, global_state=True)

    @property
    def default_params(self) -> JaxMARLParams:
        """`JaxMARLParams` with the env's time limit, its shaped reward unweighted."""
        return JaxMARLParams(max_steps_in_episode=self.default_max_steps)

    def suite_reset(self, key: jax.Array):
        """JaxMARL's reset of one env.

        Args:
            key: a PRNG key.

        Returns:
            `(obs, state)`: JaxMARL's dict of observations; its state.
        """
        return self.env.reset(key)

    def suite_action_mask(self, inner: Any) -> Optional[jax.Array]:
        """bool `[A, n]`: each agent's legal actions (`get_avail_actions`), its padding
        actions illegal; None for an env without a mask.

        Args:
            inner: JaxMARL's state.

        Returns:
            The mask, or None.
        """
        if not self.action_mask_size:
            return None
        n = self.action_mask_size
        sizes = np.asarray(self.agent_num_actions)[:, None]
        mask = jnp.asarray(np.arange(n)[None, :] < sizes)
        if self.has_avail_actions:
            avail = self.env.get_avail_actions(inner)
            mask = mask & jnp.stack([jnp.pad(jnp.asarray(avail[name], bool),
                                             (0, n - size))
                                     for name, size in zip(self.agent_names,
                                                           self.agent_num_actions)])
        return mask

    def _observe(self, obs: Dict[str, jax.Array], inner: Any) -> jax.Array:
        """The agents' observations as one array `[A, ...]` (float32), padded, each agent's
        mask last (and the global state first, with `global_state_size`)."""
        arrays = [jnp.asarray(obs[name]) for name in self.agent_names]
        mask = self.suite_action_mask(inner)
        if mask is None and len({a.shape for a in arrays}) == 1:
            rows = jnp.stack(arrays).astype(jnp.float32)
        else:
            size = max(math.prod(a.shape) for a in arrays)
            rows = jnp.stack([jnp.pad(jnp.ravel(a).astype(jnp.float32), (0, size - a.size))
                              for a in arrays])
        if mask is not None:
            rows = jnp.concatenate([rows, mask.astype(jnp.float32)], axis=-1)
        if not self.global_state_size:
            return rows
        state = _global_state(obs, self.agent_names)
        return jnp.concatenate([jnp.broadcast_to(state, (len(arrays),) + state.shape), rows],
                               axis=-1)

    def _per_agent(self, values: Dict[str, Any]) -> jax.Array:
        """float32 `[A]` of a dict of each agent's scalar."""
        return jnp.stack([jnp.asarray(values[name], jnp.float32) for name in self.agent_names])

    def step_env(self, key: jax.Array, state: SuiteState, action, params: JaxMARLParams):
        """JaxMARL's step of one env, without its auto-reset.

        Args:
            key: a PRNG key.
            state: the `SuiteState` (JaxMARL's state, the episode's clock).
            action: int `[A]`, each agent's action.
            params: the `JaxMARLParams`.

        Returns:
            `(obs [A, ...], state, reward float32 [A], terminated bool [], info)`; the
                truncation is in `state.truncated`; info has, for SMAX, `won` float32 `[]`,
                and for an env with a shaped reward the env's own `[A]` as `SCORE_REWARD`, the
                reward adding the shaped one times `params.shaped_reward_weight`.
        """
        inner = self.suite_state(state.inner)
        actions = {name: action[i] for i, name in enumerate(self.agent_names)}
        obs, inner, rewards, dones, jax_info = self.env.step_env(key, inner, actions)
        time = state.time + 1
        ended = jnp.asarray(dones["__all__"], bool)
        at_limit = time >= params.max_steps_in_episode
        if self.own_limit is not None:
            at_limit = at_limit | (ended & (time >= self.own_limit))
        info = {}
        if self.info_outcomes:
            info["won"] = _smax_won(self.env, inner)
        reward = self._per_agent(rewards)
        if "shaped_reward" in jax_info:
            info[SCORE_REWARD] = reward
            reward = reward + params.shaped_reward_weight * self._per_agent(
                jax_info["shaped_reward"])
        new_state = SuiteState(self._carried(inner), time, at_limit)
        return self._observe(obs, inner), new_state, reward, ended & ~at_limit, info


def _agent_groups(env: Any, names: Tuple[str, ...]) -> Tuple[int, ...]:
    """Each agent's group: its class's index in the env's `agent_classes` (a dict of class
    names to agent names, a property or, in MPE, a method); an agent no class names, and every
    agent of an env that names none (SMAX, Overcooked), is a group of its own."""
    try:
        classes = env.agent_classes
        classes = classes() if callable(classes) else classes
    except NotImplementedError:
        classes = {}
    group = {name: g for g, members in enumerate(classes.values()) for name in members}
    others = iter(range(len(classes), len(classes) + len(names)))
    groups = [group[name] if name in group else next(others) for name in names]
    # numbered 0, 1, ... in the order they first appear, with no empty class
    first = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    return tuple(first[g] for g in groups)


def _global_state(obs: Dict[str, jax.Array], names: Tuple[str, ...]) -> jax.Array:
    """The state a central critic reads, float32 `[W]`: JaxMARL's `world_state` where the env
    gives one (SMAX), else every agent's observation raveled and concatenated."""
    if "world_state" in obs:
        return jnp.ravel(obs["world_state"]).astype(jnp.float32)
    return jnp.concatenate([jnp.ravel(obs[name]).astype(jnp.float32) for name in names])


def _global_state_size(env_id: str, env: Any) -> int:
    """The global state's size `W` (raises ConfigError for image observations)."""
    obs = jax.eval_shape(lambda key: env.reset(key)[0], jax.random.key(0))
    images = [name for name in env.agents if len(obs[name].shape) > 1]
    if images:
        raise ConfigError(f"marl.critic=central reads a global state of vectors; "
                          f"env.name='jaxmarl/{env_id}' observes images "
                          f"({list(obs[images[0]].shape)}): use marl.critic=local")
    return jax.eval_shape(lambda o: _global_state(o, tuple(env.agents)), obs).shape[0]


def _has_avail_actions(env: Any) -> bool:
    """Whether `env.get_avail_actions` is implemented (MPE's and Overcooked's raise)."""
    try:
        jax.eval_shape(lambda key: env.get_avail_actions(env.reset(key)[1]), jax.random.key(0))
    except NotImplementedError:
        return False
    return True


def _is_smax(env: Any) -> bool:
    return hasattr(env, "num_allies") and hasattr(env, "num_enemies")


def _smax_won(env: Any, inner: Any) -> jax.Array:
    """SMAX's battle won: every enemy dead, an ally alive (float32 `[]`)."""
    alive = getattr(inner, "state", inner).unit_alive
    won = ~alive[env.num_allies:].any() & alive[:env.num_allies].any()
    return won.astype(jnp.float32)


def _constructor_kwargs(env_id: str, params: Dict[str, Any]) -> Dict[str, Any]:
    """JaxMARL's keywords from `env.params` (without purerl's `max_steps_in_episode`), the
    named objects (`layout`, `map`) looked up."""
    kwargs = {}
    for key, value in params.items():
        if key == "max_steps_in_episode":
            continue
        if key not in NAMED_ARGUMENTS:
            kwargs[key] = value
            continue
        keyword, module, table_name = NAMED_ARGUMENTS[key]
        table = getattr(importlib.import_module(module), table_name)
        if value not in table:
            raise ConfigError(
                f"env.params.{key}={value!r} is not one of jaxmarl's {table_name}: "
                + ", ".join(sorted(table)))
        kwargs[keyword] = table[value]
    return kwargs


def make(env_id: str, config: EnvConfig) -> JaxMARLEnv:
    """The JaxMARL env `env.name="jaxmarl/<id>"` names, made with `env.params` (see the
    module's docstring).

    Args:
        env_id: a JaxMARL id (`jaxmarl.registered_envs`).
        config: the `env` settings: `params`.

    Returns:
        The `JaxMARLEnv`.

    Raises:
        ConfigError: an unknown id, layout or map, or the env not made with the keywords.
    """
    if env_id not in jaxmarl.registered_envs:
        raise ConfigError(f"env.name='jaxmarl/{env_id}' is not a JaxMARL environment id; "
                          + close_matches(env_id, jaxmarl.registered_envs, "jaxmarl"))
    kwargs = _constructor_kwargs(env_id, dict(config.params))
    try:
        env = jaxmarl.make(env_id, **kwargs)
    except Exception as error:
        given = ", ".join(f"{k}={v!r}" for k, v in config.params.items()
                          if k != "max_steps_in_episode")
        raise ConfigError(f"env.name='jaxmarl/{env_id}' could not be made"
                          f"{' with ' + given if given else ''}: {one_line(error)}") from None
    return JaxMARLEnv(env_id, env, tuple(key for key in config.params
                                        if key != "max_steps_in_episode"))


def accepts(obj: Any) -> bool:
    """Whether `obj` is a JaxMARL `MultiAgentEnv` this adapter wraps.

    Args:
        obj: a user's env object (`env.name=module:attr`).

    Returns:
        True when `wrap` takes it.
    """
    return isinstance(obj, MultiAgentEnv)


def wrap(obj: Any, config: EnvConfig, params: Any = None) -> JaxMARLEnv:
    """A user's `MultiAgentEnv` (its settings, `max_steps` included, are its own).

    Args:
        obj: the user's env (`accepts(obj)`).
        config: the `env` settings.
        params: unused (the env holds its settings).

    Returns:
        The `JaxMARLEnv`.
    """
    return JaxMARLEnv(type(obj).__name__, obj)
