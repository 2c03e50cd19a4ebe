"""XLand-MiniGrid (`xminigrid`) envs: `env.name=xminigrid/<id>`.

`<id>` is one of `xminigrid.registered_environments()`. The ported MiniGrid envs
(`MiniGrid-DoorKey-5x5`, `MiniGrid-Empty-8x8`, ...) need nothing more. The XLand envs
(`XLand-MiniGrid-R4-13x13`, ...) are meta-RL envs whose goal and rules come from a ruleset
benchmark: `xminigrid/XLand-MiniGrid-R4-13x13/trivial-21k` draws a ruleset of the benchmark at
every reset, `xminigrid/XLand-MiniGrid-R4-13x13/trivial-21k/7` keeps its ruleset 7. A benchmark
is downloaded from Hugging Face on first use into `$XLAND_MINIGRID_DATA` (`~/.xland_minigrid`);
where that fails it is a one-line ConfigError.

Signals: xminigrid's `TimeStep` is dm_env-style. `step_type == LAST` ends an episode; with
`discount == 0` it is a termination (the goal reached), with `discount == 1` xminigrid's own
time limit (`EnvParams.max_steps`, 10 * H * W for MiniGrid, 3 * H * W for XLand): a truncation.
purerl's `max_steps_in_episode` defaults to that same limit, so both fire on the same step.
The step is `Environment.step`, which does not auto-reset (purerl does).

Observations: the agent's egocentric view, `[view_size, view_size, 2]` (tile id, colour id per
cell: `xminigrid.core.constants.NUM_TILES` = 13 tile kinds, `NUM_COLORS` = 12 colours), cast
from uint8 to float32 and kept as an image for a CNN (`network=cnn`) or flattened by an MLP.
Actions: `Discrete(6)` (forward, turn right, turn left, pick up, put down, toggle).
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import xminigrid
from gymnax.environments import spaces
from xminigrid.environment import Environment as XMiniGridEnvironment
from xminigrid.types import StepType

from purerl.config import ConfigError, EnvConfig
from purerl.envs.suites.base import SuiteEnv, close_matches


class XMiniGridEnv(SuiteEnv):
    """An xminigrid `Environment` with its `EnvParams` (and, for XLand, a benchmark)."""

    suite_name = "xminigrid"

    def __init__(self, env_id: str, env: XMiniGridEnvironment, params: Any,
                 benchmark: Any = None, ruleset_id: Optional[int] = None):
        if params.max_steps is None:
            raise ValueError(f"xminigrid env {env_id!r} has params.max_steps=None")
        self.env = env
        self.params = params
        self.benchmark = benchmark
        self.ruleset_id = ruleset_id
        super().__init__(env_id, spaces.Discrete(int(env.num_actions(params))),
                         int(params.max_steps))

    def _params_for(self, key: jax.Array):
        if self.benchmark is None:
            return self.params
        if self.ruleset_id is None:
            ruleset = self.benchmark.sample_ruleset(key)
        else:
            ruleset = self.benchmark.get_ruleset(self.ruleset_id)
        return self.params.replace(ruleset=ruleset)

    def suite_reset(self, key: jax.Array):
        """The suite's reset of one env.

        Args:
            key: a PRNG key.

        Returns:
            `(obs, state)`: the egocentric view, uint8 `[view_size, view_size, 2]`;
                xminigrid's `TimeStep`.
        """
        key_ruleset, key_reset = jax.random.split(key)
        timestep = self.env.reset(self._params_for(key_ruleset), key_reset)
        return timestep.observation, timestep

    def suite_step(self, key: jax.Array, inner: Any, action):
        # The step reads goal and rules from the state, not from params.ruleset.
        """The suite's step of one env.

        Args:
            key: a PRNG key.
            inner: xminigrid's `TimeStep`.
            action: the action, as `action_space()` gives it.

        Returns:
            `(obs, state, reward, terminated, truncated)`; reward, terminated and truncated `[]`.
        """
        timestep = self.env.step(self.params, inner, jnp.asarray(action, jnp.int32))
        last = timestep.step_type == StepType.LAST
        terminated = last & (timestep.discount == 0.0)
        truncated = last & (timestep.discount != 0.0)
        return (timestep.observation, timestep, timestep.reward,
                terminated, truncated)


def _unknown(name: str, choices, what: str) -> ConfigError:
    return ConfigError(f"env.name='xminigrid/{name}' is not {what}; "
                       + close_matches(name, choices, "xminigrid"))


def _load_benchmark(full_id: str, benchmark_name: str):
    # the suite's package, an optional extra: when one of its envs is named
    from xminigrid import benchmarks

    if benchmark_name not in benchmarks.registered_benchmarks():
        raise ConfigError(
            f"env.name='xminigrid/{full_id}': {benchmark_name!r} is not an XLand-MiniGrid "
            "benchmark; " + close_matches(benchmark_name, benchmarks.registered_benchmarks(),
                                          f"xminigrid/{full_id.split('/', 1)[0]}"))
    try:
        return benchmarks.load_benchmark(benchmark_name)
    except Exception as error:  # the download (urllib) or an unreadable file
        first = (str(error).strip().splitlines() or [""])[0]
        raise ConfigError(
            f"env.name='xminigrid/{full_id}' needs the XLand-MiniGrid benchmark "
            f"{benchmark_name!r}, downloaded on first use from huggingface.co/datasets/"
            f"{benchmarks.HF_REPO_ID} into {benchmarks.DATA_PATH} ($XLAND_MINIGRID_DATA), and "
            f"loading it failed ({type(error).__name__}: {first}); put the file "
            f"{benchmarks.NAME2HFFILENAME[benchmark_name]!r} there or choose a MiniGrid-* id"
        ) from None


def make(env_id: str, config: EnvConfig) -> XMiniGridEnv:
    """`<id>`, or for an XLand env `<id>/<benchmark>` or `<id>/<benchmark>/<ruleset index>`.

    Args:
        env_id: the id, `<id>[/<benchmark>[/<ruleset index>]]`.
        config: the `env` settings (unused).

    Returns:
        The `XMiniGridEnv`.

    Raises:
        ConfigError: an unknown id, benchmark or ruleset, or a benchmark that does not load.
    """
    base_id, _, rest = env_id.partition("/")
    registered = xminigrid.registered_environments()
    if base_id not in registered:
        raise _unknown(base_id, registered, "an XLand-MiniGrid environment id")
    is_xland = base_id.startswith("XLand-MiniGrid")
    if rest and not is_xland:
        raise ConfigError(
            f"env.name='xminigrid/{env_id}': only XLand-MiniGrid-* envs take a ruleset "
            f"benchmark; write xminigrid/{base_id}")
    if is_xland and not rest:
        # the suite's package, an optional extra: when one of its envs is named
        from xminigrid.benchmarks import registered_benchmarks

        raise ConfigError(
            f"env.name='xminigrid/{env_id}' needs a ruleset benchmark (without one it has no "
            f"goal): write xminigrid/{base_id}/<benchmark>[/<ruleset index>] with a benchmark of "
            f"{', '.join(registered_benchmarks())} (downloaded on first use)")
    env, params = xminigrid.make(base_id)
    benchmark = ruleset_id = None
    if rest:
        benchmark_name, _, index = rest.partition("/")
        if index and not index.isdigit():
            raise ConfigError(
                f"env.name='xminigrid/{env_id}': the ruleset index {index!r} is not a number")
        benchmark = _load_benchmark(env_id, benchmark_name)
        if index:
            ruleset_id = int(index)
            if ruleset_id >= benchmark.num_rulesets():
                raise ConfigError(
                    f"env.name='xminigrid/{env_id}': benchmark {benchmark_name!r} has "
                    f"{benchmark.num_rulesets()} rulesets (0 .. {benchmark.num_rulesets() - 1})")
    return XMiniGridEnv(env_id, env, params, benchmark, ruleset_id)


def accepts(obj: Any) -> bool:
    """Whether `obj` is a XLand-MiniGrid env this adapter wraps.

    Args:
        obj: a user's env object (`env.name=module:attr`).

    Returns:
        True when `wrap` takes it.
    """
    return isinstance(obj, XMiniGridEnvironment)


def wrap(obj: Any, config: EnvConfig, params: Any = None) -> XMiniGridEnv:
    """A user's xminigrid env, with its `EnvParams` (`params`; default: `default_params()`).

    Args:
        obj: the user's env (`accepts(obj)`).
        config: the `env` settings.
        params: its `EnvParams`; None: `obj.default_params()`.

    Returns:
        The `XMiniGridEnv`.

    Raises:
        ValueError: `params.max_steps` is None.
    """
    params = obj.default_params() if params is None else params
    return XMiniGridEnv(type(obj).__name__, obj, params)
