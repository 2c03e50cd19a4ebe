"""The program of a run: an algorithm (PPO by default) mapped over seeds (`vmap`) and devices
(`shard_map`).

`make_program(config) -> Program(init, run, train)`, the jittable functions the CLI compiles;
`make_train(config) -> train(key)`, the whole run as one function of a key.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from purerl.algos.algorithm import Algorithm, MakeAlgorithm, Metrics, RunnerState
from purerl.algos.learner import Optimizer
from purerl.algos.ppo import make_ppo
from purerl.config import Config, env_devices
from purerl.core.losses import LossTerm
from purerl.core.prng import convert_key
from purerl.core.schedules import HyperParams, member_hyperparams
from purerl.envs import make_env
from purerl.nets.agent import Agent, make_agent
from purerl.parallel.devices import DEVICE_AXIS, make_mesh, map_seeds, shard_over_devices
from purerl.plan import ExecutionPlan, execution_plan
from purerl.plugins import load_callable
from purerl.validation import check_algorithm_settings, validate


class Program(NamedTuple):
    """The jittable functions of one configured run, mapped over members and devices.

    S is the run's members (`Config.num_members`: sweep grid points x seeds) and B
    `env.num_envs`; every leaf of a state has the members axis first, `[S, ...]`, and the
    envs' leaves (`env_state`, `obs`, `normalizer.returns`, `memory`) `[S, B, ...]`.

    Attributes:
        init: `init(key, hparams=None) -> RunnerState`, the members' states before the first
            update, from the run's PRNG key. `hparams`: the members' base `HyperParams`,
            leaves `[S]` (default: `hyperparams`, the config's), an argument
            so that no program depends on their values.
        run: `run(state, num) -> (RunnerState, Metrics)`: `num <= chunk` updates (an int32
            scalar), the metrics `[S, chunk]`, with zeros past `num`.
        train: `train(key) -> (RunnerState, Metrics)`: the whole run, init and every update,
            the metrics `[S, num_updates]`.
        chunk: the updates one `run` call holds room for.
        num_devices: the devices the programs are mapped over (of every process).
        state_sharding: the state's shardings over the devices, a prefix tree of the
            `RunnerState` (`jit`'s `out_shardings` of `init`), so that the programs taking a
            state can be lowered before `init` is compiled.
        plan: the faster paths its programs take on their platform.
        hyperparams: the members' base `HyperParams`, leaves `[S]`, of the config it was made
            for (`schedules.member_hyperparams`, with the algorithm's own), what `init` takes.
        agent: the agent that the algorithm acts with (`Algorithm.agent`, else the one the
            settings describe), which evaluation and `purerl.load` act with.
        given: the objects given from Python or chosen for them (algorithm, network, loss
            terms, optimizer, plan); compiled programs are reused only for the same ones.
    """

    init: Callable[..., RunnerState]
    run: Callable[[RunnerState, jax.Array], Tuple[RunnerState, Metrics]]
    train: Callable[[jax.Array], Tuple[RunnerState, Metrics]]
    chunk: int
    num_devices: int
    state_sharding: object
    plan: ExecutionPlan
    hyperparams: HyperParams = None
    agent: Agent = None
    given: Tuple = ()


def make_program(config: Config, chunk: Optional[int] = None, *,
                 algorithm: Optional[MakeAlgorithm] = None, network=None,
                 loss_terms: Sequence[LossTerm] = (),
                 optimizer: Optional[Optimizer] = None,
                 plan: Optional[ExecutionPlan] = None) -> Program:
    """The run's functions, mapped over members (`vmap`) and devices (`shard_map`), not yet
    jitted.

    On several devices, members that split evenly over them are split (each device trains
    its share, vmapped, with no communication); otherwise every member's envs are split, and
    gradients and statistics averaged over the devices.

    Args:
        config: the run's settings.
        chunk: the updates one `run` call holds room for (default: all).
        algorithm: `make_fn(config, env, env_params, *, num_envs, axis_name, network,
            loss_terms, optimizer, plan) -> Algorithm` (`purerl.algos.algorithm`); default: what the
            `algorithm` setting names, else `make_ppo`.
        network: a user's network, a flax module or a factory `(obs_shape, action_spec,
            network_config) -> module` whose module maps observations `[B, *obs_shape]` to
            `(policy_out, value [B], *extras)`: logits `[B, sum(num_choices)]` or Gaussian
            means `[B, action_dim]` (`purerl.nets.networks`); default: `network.factory` if set,
            else purerl's.
        loss_terms: loss terms added to PPO's after those `ppo.loss_terms` names
            (`purerl.core.losses.LossTerm` states the protocol).
        optimizer: `HyperParams -> optax.GradientTransformation` of the parameter tree
            (`purerl.algos.learner`); default: Adam after global-norm clipping.
        plan: the faster paths to take (`purerl.plan`); default: those the `plan` setting
            names (auto: those of the devices' platform).

    Returns:
        The `Program`: `init`, `run` and `train` over the members `[S, ...]`, and what they
            were built with.

    Raises:
        ConfigError: a setting does not fit (`validate`, with the device count), a user's
            network has other shapes than purerl needs, or a `pkg.module:name` setting does
            not import.
    """
    num_devices = jax.device_count()  # of every process (purerl.parallel.distributed)
    validate(config, num_devices)
    terms = [load_callable("ppo.loss_terms", name) for name in config.ppo.loss_terms]
    terms += list(loss_terms)
    if algorithm is None:
        algorithm = (make_ppo if config.algorithm_name is None
                     else load_callable("algorithm", config.algorithm_name))
    own = check_algorithm_settings(config, algorithm)
    env, env_params = make_env(config.env)
    plan = execution_plan(jax.devices()[0].platform, config.plan) if plan is None else plan
    num_seeds, num_updates = config.num_members, config.num_updates  # seeds: all members
    split_envs = env_devices(num_seeds, num_devices) > 1
    settings = {} if own.settings is None else {"settings": own.settings}
    algo = algorithm(config, env, env_params,
                     num_envs=config.env.num_envs // (num_devices if split_envs else 1),
                     axis_name=DEVICE_AXIS if split_envs else None, network=network,
                     loss_terms=terms, optimizer=optimizer, plan=plan, **settings)
    hyperparams = member_hyperparams(config, own.hyperparams)
    device_seeds = num_seeds if split_envs else num_seeds // num_devices
    chunk = num_updates if chunk is None else min(chunk, num_updates)
    seed_keys = functools.partial(_member_keys, config)

    def seed_hparams(hparams=None):
        return hyperparams if hparams is None else hparams

    def init_seeds(keys, hparams):
        # One seed after another, not vmapped: a vmapped orthogonal init is a batched QR, whose
        # LAPACK kernel can wait forever for XLA:CPU's pool threads when they are all busy.
        return jax.lax.map(lambda args: algo.init(*args), (keys, hparams))

    def train_updates(state):
        return jax.lax.scan(lambda s, _: algo.update(s), state, None, num_updates)

    def train_seeds(keys, hparams):
        return map_seeds(train_updates, device_seeds)(init_seeds(keys, hparams))

    mesh = make_mesh(num_devices)
    seeds, state_spec = _partition_specs(algo, split_envs)
    shard = functools.partial(shard_over_devices, mesh=mesh, collectives=split_envs)
    init = shard(init_seeds, in_specs=(seeds, seeds), out_specs=state_spec)
    run = shard(map_seeds(_chunk_runner(algo.update, chunk), device_seeds, in_axes=(0, None)),
                in_specs=(state_spec, P()), out_specs=(state_spec, seeds))
    train = shard(train_seeds, in_specs=(seeds, seeds), out_specs=(state_spec, seeds))
    return Program(
        init=lambda key, hparams=None: init(seed_keys(key), seed_hparams(hparams)),
        run=run,
        train=lambda key: train(seed_keys(key), seed_hparams()),
        chunk=chunk,
        num_devices=num_devices,
        state_sharding=jax.tree.map(lambda spec: NamedSharding(mesh, spec), state_spec,
                                    is_leaf=lambda x: isinstance(x, P)),
        plan=plan,
        hyperparams=hyperparams,
        agent=(make_agent(config.env, config.network, env, env_params, network, plan,
                          marl=config.marl) if algo.agent is None else algo.agent),
        given=(algorithm, network, *loss_terms, optimizer, plan),
    )


def _member_keys(config: Config, key: jax.Array) -> jax.Array:
    """The members' keys `[S]` from the run's `key`: a key per seed, the same seeds at every
    grid point of a sweep."""
    # Converted first: the PRNG of the run is cheaper to compile than JAX's default one.
    key = convert_key(key, config.prng_impl)
    keys = key[None] if config.num_seeds == 1 else jax.random.split(key, config.num_seeds)
    points = config.num_members // config.num_seeds
    return keys if points == 1 else jnp.tile(keys, points)


def _chunk_runner(update: Callable, chunk: int) -> Callable:
    """`run_one(state, num) -> (state, metrics [chunk, ...])`: `num <= chunk` updates of one
    member, their metrics in a buffer of `chunk` rows (rows after `num` zero)."""
    update = jax.jit(update)  # traced once: for the metrics' shapes and in the loop

    def run_one(state: RunnerState, num):
        metrics_shape = jax.eval_shape(update, state)[1]
        buffer = jax.tree.map(lambda s: jnp.zeros((chunk, *s.shape), s.dtype), metrics_shape)

        def body(i, carry):
            state, buffer = carry
            state, metrics = update(state)
            return state, jax.tree.map(lambda b, m: b.at[i].set(m), buffer, metrics)

        return jax.lax.fori_loop(0, num, body, (state, buffer))

    return run_one


def _partition_specs(algo: Algorithm, split_envs: bool) -> Tuple[P, Any]:
    """`(seeds, state_spec)`: the `PartitionSpec` of the members' keys and metrics `[S, ...]`,
    and the prefix tree of specs of their `RunnerState`: split by member, or with
    `split_envs`, the leaves that `algo.envs_axis` marks split along the envs' axis B."""
    if not split_envs:  # every leaf `[S, ...]` split by seed
        seeds = P(DEVICE_AXIS)
        return seeds, seeds
    seeds, env_split = P(), P(None, DEVICE_AXIS)  # leaves `[S, ...]`, the envs' `[S, B, ...]`
    return seeds, jax.tree.map(lambda envs: env_split if envs else seeds, algo.envs_axis)


def make_train(config: Config, **given) -> Callable[[jax.Array], Tuple[RunnerState, Metrics]]:
    """The whole run as one function of a PRNG key, to `jax.jit`.

    Args:
        config: the run's settings.
        **given: `make_program`'s `algorithm`, `network`, `loss_terms`, `optimizer` and
            `plan`.

    Returns:
        `train(key) -> (RunnerState, Metrics)`: the members' final states, leaves `[S, ...]`,
            and every update's metrics, `[S, num_updates]` (S = `config.num_members`).

    Raises:
        ConfigError: as `make_program` raises it.
    """
    return make_program(config, **given).train
