"""The actor-critic networks: purerl's own (a shared trunk with two heads, or two separate
towers; with a memory, `purerl.nets.recurrent`), a user's network (`network.factory`), and
`make_network`, which builds the one the settings describe."""

from __future__ import annotations

import math
from typing import Any, Optional, Protocol, Sequence, Tuple, Union, runtime_checkable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from purerl.config import ConfigError, NetworkConfig
from purerl.envs.action_spaces import ActionSpec
from purerl.nets.layers import (
    MLP,
    TOWER_KERNELS,
    ActorCriticBase,
    VariablesAsGiven,
    conv_output_size,
    dense,
)
from purerl.nets.recurrent import RecurrentActorCritic, StepOfUnroll, scan_steps
from purerl.plan import PLAIN, ExecutionPlan
from purerl.plugins import load_callable


class NetworkFactory(Protocol):
    """What `network.factory=pkg.module:fn` names, or `make_program(config, network=fn)`
    takes: builds the agent's network for an env's spaces."""

    def __call__(self, obs_shape: Tuple[int, ...], action_spec: ActionSpec,
                 network_config: NetworkConfig) -> nn.Module:
        """The network for these spaces.

        Args:
            obs_shape: one observation's shape (the env's, after purerl's wrappers).
            action_spec: the env's action space (`purerl.envs.action_spaces.ActionSpec`):
                `num_outputs` policy outputs, a factorized categorical or a Gaussian.
            network_config: the `network` settings (`NetworkConfig`), for a factory that
                reads them.

        Returns:
            A flax module mapping observations `[B, *obs_shape]` to `(policy_out, value [B],
                *extras)`: logits `[B, action_spec.num_outputs]` or Gaussian means `[B,
                action_dim]`; extras go to the loss terms. A module with memory has an int
                attribute `carry_size` C and maps `(carry [B, C], obs)` to `(carry [B, C],
                policy_out, value [B])` (`UserRecurrentActorCritic`).
        """


# A user's network from Python: the flax module itself, or a `NetworkFactory`
UserNetwork = Union[nn.Module, NetworkFactory]


@runtime_checkable
class ActorCriticNetwork(Protocol):
    """What the rollout, the learner and evaluation call on a feed-forward network: purerl's
    own (`ActorCritic`), a user's module wrapped (`UserActorCritic`), or a factory's module that
    has all of it, used as it is.

    Attributes:
        shared: True when one call gives both the policy and the value (the rollout then
            calls `__call__`); False when `policy` alone costs less (separate towers).
    """

    shared: bool

    def __call__(self, obs: jax.Array, batch_ndim: int = 1) -> Tuple[Any, ...]:
        """`[*batch, *obs_shape]` -> `(policy_out, value [*batch], *extras)`: logits
        `[*batch, num_outputs]`, or a Gaussian's `(mean, log_std)`, each `[*batch,
        num_outputs]`."""

    def policy(self, obs: jax.Array, batch_ndim: int = 1) -> Any:
        """`__call__`'s policy output alone.

        Args:
            obs: observations `[*batch, *obs_shape]`.
            batch_ndim: how many leading axes of `obs` are batch axes.

        Returns:
            The policy output, as `__call__` gives it.
        """

    def value(self, obs: jax.Array, batch_ndim: int = 1) -> jax.Array:
        """`__call__`'s value alone.

        Args:
            obs: observations `[*batch, *obs_shape]`.
            batch_ndim: how many leading axes of `obs` are batch axes.

        Returns:
            The value `[*batch]`.
        """

    def step_variables(self, variables: Any) -> Any:
        """The variables as a loop that runs `policy` at every step reads them, prepared once
        before it (purerl's batched towers slice the policy's kernels out).

        Args:
            variables: the network's variables, `{"params": ...}`.

        Returns:
            The variables to act with; `variables` itself where nothing is to prepare.
        """


@runtime_checkable
class RecurrentActorCriticNetwork(Protocol):
    """What the rollout, the sequence learner and evaluation call on a network with memory:
    purerl's own (`purerl.nets.recurrent.RecurrentActorCritic`), a user's module wrapped
    (`UserRecurrentActorCritic`), or a factory's module that has all of it.

    Attributes:
        carry_size: the carry's width C.
    """

    carry_size: int

    def initial_carry(self, batch: Tuple[int, ...]) -> jax.Array:
        """The carry at an episode's start.

        Args:
            batch: the leading shape, e.g. `(B,)`.

        Returns:
            float32 `[*batch, C]`.
        """

    def unroll(self, carry: jax.Array, obs: jax.Array, first: jax.Array) -> Tuple[Any, ...]:
        """`T` steps, the carry zeroed before a step that starts an episode.

        Args:
            carry: `[B, C]` before the first step.
            obs: the network's inputs `[T, B, *obs_shape]`.
            first: bool `[T, B]`: the step starts an episode.

        Returns:
            `(carry [B, C], policy_out [T, B, ...], value [T, B])`.
        """

    def __call__(self, carry: jax.Array, obs: jax.Array, first: jax.Array) -> Tuple[Any, ...]:
        """One step: `(carry [B, C], policy_out [B, ...], value [B])`."""

    def value(self, carry: jax.Array, obs: jax.Array, first: jax.Array) -> jax.Array:
        """One step's value alone.

        Args:
            carry: `[B, C]`.
            obs: `[B, *obs_shape]`.
            first: bool `[B]`.

        Returns:
            float32 `[B]`.
        """

    def step_variables(self, variables: Any) -> Any:
        """As `ActorCriticNetwork.step_variables`.

        Args:
            variables: the network's variables, `{"params": ...}`.

        Returns:
            The variables to act with.
        """


class ActorCritic(ActorCriticBase):
    """Maps observations `[B, *obs_shape]` to (policy output, value `[B]`).

    The policy output is logits `[B, num_outputs]`, or for a Gaussian policy (`gaussian=True`)
    `(mean, log_std)`, each `[B, num_outputs]`, with a learned state-independent log-std.
    `shared=True`: one torso feeds both heads. `shared=False`: separate policy and value towers.
    Heads use the usual PPO init: gain 0.01 for the policy, 1.0 for the value; hidden layers
    and convolutions sqrt 2; biases zero. flax's own `init` draws it; `init_params` gives the
    same tree, drawn at once on CPU (what the trainer calls).
    """

    POLICY_TOWER = 0  # of the batched towers; the value's is 1

    @property
    def _batched_towers(self) -> bool:
        """Separate policy and value MLPs over the same raw inputs run as one two-tower MLP."""
        return not (self.shared or self.conv_channels or self.vocab_size or self.value_inputs)

    def setup(self):
        if self._batched_towers:  # the heads too: policy `[F, num_outputs]`, value `[F, 1]`
            self.towers = MLP(self.hidden_sizes, self.activation, num_towers=2,
                              head_sizes=(self.num_outputs, 1), head_scales=(0.01, 1.0),
                              towers_apart=self.towers_apart)
        else:
            self.policy_torso = self._torso()
            if not self.shared:
                self.value_torso = self._torso()
            self.policy_head = dense(self.num_outputs, 0.01)
            self.value_head = dense(1, 1.0)
        if self.gaussian:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))

    def __call__(self, obs: jax.Array, batch_ndim: int = 1) -> Tuple[Any, jax.Array]:
        batch = obs.shape[:batch_ndim]
        x = self._flat(obs, batch_ndim)
        if self._batched_towers:
            out = self.towers(x)  # [2, N, num_outputs]
            policy_head, value = out[0], out[1, :, 0]
        else:
            policy_features = self.policy_torso(self._tower_inputs(x, value=False))
            value_features = (policy_features if self.shared
                              else self.value_torso(self._tower_inputs(x, value=True)))
            policy_head, value = self.policy_head(policy_features), self.value_head(value_features)
        return self._policy_out(policy_head, batch), value.reshape(batch)

    def policy(self, obs: jax.Array, batch_ndim: int = 1) -> Any:
        """The actor alone: `__call__`'s policy output (batched towers: the policy tower only;
        a shared trunk computes what the value head would also read).

        Args:
            obs: observations `[*batch, *obs_shape]`.
            batch_ndim: how many leading axes of `obs` are batch axes.

        Returns:
            The policy output: logits `[*batch, num_outputs]`, or a Gaussian's `(mean,
                log_std)`, each `[*batch, num_outputs]`.
        """
        x = self._flat(obs, batch_ndim)
        if self._batched_towers:
            head = self.towers(x, tower=self.POLICY_TOWER)
        else:
            head = self.policy_head(self.policy_torso(self._tower_inputs(x, value=False)))
        return self._policy_out(head, obs.shape[:batch_ndim])

    def step_variables(self, variables: Any) -> Any:
        """`variables` with the policy tower's kernels of the batched towers sliced out once
        (under `TOWER_KERNELS`), for a loop that runs the policy at every step; unchanged
        without batched towers.

        Args:
            variables: the network's variables, `{"params": ...}`.

        Returns:
            The variables, the policy tower's kernels under `TOWER_KERNELS` as well.
        """
        towers = variables["params"].get("towers")
        if towers is None:
            return variables
        tower = self.POLICY_TOWER
        return {**variables, TOWER_KERNELS: {"towers": {
            f"{name}_{tower}": kernel[tower] for name, kernel in towers.items()
            if name.startswith("kernel")}}}

    def value(self, obs: jax.Array, batch_ndim: int = 1) -> jax.Array:
        """The critic alone: `[*batch, *obs_shape] -> [*batch]` (batched towers: the value
        tower only).

        Args:
            obs: observations `[*batch, *obs_shape]`.
            batch_ndim: how many leading axes of `obs` are batch axes.

        Returns:
            The value `[*batch]`.
        """
        x = self._flat(obs, batch_ndim)
        if self._batched_towers:
            value = self.towers(x, tower=1)[:, 0]
        else:
            torso = self.policy_torso if self.shared else self.value_torso
            value = self.value_head(torso(self._tower_inputs(x, value=not self.shared)))
        return value.reshape(obs.shape[:batch_ndim])


class UserActorCritic(VariablesAsGiven, nn.Module):
    """A user's flax module as purerl's actor-critic. The module maps float32 observations
    `[B, *obs_shape]` to `(policy_out, value, *extras)`: `policy_out` the logits
    `[B, num_outputs]` of a categorical policy (factorized over its controls) or the mean
    `[B, num_outputs]` of a Gaussian one, `value` `[B]`; `extras` (anything more) reach the
    loss terms. A Gaussian policy's state-independent log-std is purerl's own parameter
    (`log_std`, beside the module's params under `network`).
    """

    network: nn.Module
    num_outputs: int
    gaussian: bool = False
    shared = True  # one call gives the policy and the value

    @nn.compact
    def __call__(self, obs: jax.Array, batch_ndim: int = 1) -> Tuple[Any, ...]:
        """`[*batch, *obs_shape]` -> `(policy output, value [*batch], *extras)`; a Gaussian
        policy's output is `(mean, log_std)`, each `[*batch, num_outputs]`.

        Args:
            obs: observations `[*batch, *obs_shape]`.
            batch_ndim: how many leading axes of `obs` are batch axes.

        Returns:
            `(policy output, value [*batch], *extras)`.
        """
        batch = obs.shape[:batch_ndim]
        flat = obs.reshape(math.prod(batch), *obs.shape[batch_ndim:]).astype(jnp.float32)
        policy_head, value, *extras = self.network(flat)
        head = policy_head.reshape(*batch, -1)
        if self.gaussian:
            log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))
            head = (head, jnp.broadcast_to(log_std, head.shape))
        return (head, value.reshape(batch), *extras)

    def policy(self, obs: jax.Array, batch_ndim: int = 1) -> Any:
        """`__call__`'s policy output alone.

        Args:
            obs: observations `[*batch, *obs_shape]`.
            batch_ndim: how many leading axes of `obs` are batch axes.

        Returns:
            The policy output, as `__call__` gives it.
        """
        return self(obs, batch_ndim)[0]

    def value(self, obs: jax.Array, batch_ndim: int = 1) -> jax.Array:
        """`__call__`'s value alone.

        Args:
            obs: observations `[*batch, *obs_shape]`.
            batch_ndim: how many leading axes of `obs` are batch axes.

        Returns:
            The value `[*batch]`.
        """
        return self(obs, batch_ndim)[1]


class UserRecurrentActorCritic(StepOfUnroll, VariablesAsGiven, nn.Module):
    """A user's flax module with memory as purerl's recurrent actor-critic. The module has an
    int attribute `carry_size` C and maps `(carry [B, C], obs [B, *obs_shape])` to
    `(carry [B, C], policy_out, value [B])`, `policy_out` as `UserActorCritic`'s. Every
    episode starts from zeros: purerl zeroes the carry of an env whose observation is its
    episode's first before the module reads it, as the built-in GRU's (`purerl.nets.recurrent`).

    `__call__(carry, obs, first)`, `unroll(carry, obs [T, B, ...], first [T, B])` and
    `value(carry, obs, first)` as `RecurrentActorCritic`'s, which the rollout, the sequence
    learner and evaluation call alike.
    """

    network: nn.Module
    num_outputs: int
    carry_size: int
    gaussian: bool = False
    shared = True  # one call gives the policy and the value

    def setup(self):
        """flax's setup: a Gaussian policy's state-independent log-std."""
        if self.gaussian:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))

    def unroll(self, carry: jax.Array, obs: jax.Array, first: jax.Array):
        """`T` steps of the module.

        Args:
            carry: `[B, C]` before the first step.
            obs: the network's inputs `[T, B, *obs_shape]`.
            first: bool `[T, B]`: the step starts an episode (the carry is zeroed before it).

        Returns:
            `(carry [B, C], policy_out [T, B, num_outputs], value [T, B])`; a Gaussian's
                policy output is `(mean, log_std)`.
        """
        def step(module, carry, inputs):
            obs, first = inputs
            carry = jnp.where(first[:, None], 0.0, carry)
            carry, head, value = module.network(carry, obs.astype(jnp.float32))[:3]
            return carry, (head, value)

        carry, (head, value) = scan_steps(step, self, carry, (obs, first))
        if self.gaussian:
            head = (head, jnp.broadcast_to(self.log_std, head.shape))
        return carry, head, value

    def value(self, carry: jax.Array, obs: jax.Array, first: jax.Array) -> jax.Array:
        """V of one step's observations after `carry`.

        Args:
            carry: `[B, C]`.
            obs: `[B, *obs_shape]`.
            first: bool `[B]`.

        Returns:
            float32 `[B]`.
        """
        return self(carry, obs, first)[2]


def make_network(net: NetworkConfig, spec: ActionSpec, obs_shape: Sequence[int],
                 obs_bounds: Optional[Tuple[Any, Any]] = None,
                 network: Optional[UserNetwork] = None,
                 plan: ExecutionPlan = PLAIN, value_inputs: int = 0) -> nn.Module:
    """The actor-critic the settings describe: the module of a `NetworkFactory` (a user's, or
    `purerl_network`), as the agent calls it.

    Args:
        net: the `network` settings.
        spec: the policy's actions.
        obs_shape: the observations the network reads (the wrapped env's).
        obs_bounds: `(low, high)` of what the network reads, each broadcastable to
            `obs_shape`: the bounds a quantizing torso (`net.vocab_size`) scales by.
        network: a user's network given from Python (a flax module or a factory), in place of
            `net.factory`.
        plan: the execution plan (`conv_patch_matmul`, `towers_apart`).
        value_inputs: > 0: the observation vector's first this many entries are the value
            tower's input and the rest the policy's (a central critic's state,
            `purerl.nets.multi_agent`); a user's network reads the whole observation.

    Returns:
        The factory's module where it is an `ActorCriticNetwork` or a
            `RecurrentActorCriticNetwork` (purerl's own are); else the module wrapped, a
            `UserActorCritic`, or a `UserRecurrentActorCritic` when it has a `carry_size`.

    Raises:
        ConfigError: a CNN does not fit the observations, or a user's network gives other
            shapes than purerl needs.
    """
    obs_shape = tuple(obs_shape)
    if network is None and net.factory is None:
        return purerl_network(obs_shape, spec, net, obs_bounds=obs_bounds, plan=plan,
                              value_inputs=value_inputs)
    label = "network.factory=" + net.factory if network is None else (
        f"network={type(network).__name__}")
    user = load_callable("network.factory", net.factory) if network is None else network
    module = user
    if not isinstance(user, nn.Module):
        try:
            module = user(obs_shape, spec, net)
        except ConfigError:
            raise
        except Exception as error:
            raise ConfigError(f"{label}: calling it failed: {' '.join(str(error).split())}") \
                from None
    if not isinstance(module, nn.Module):
        raise ConfigError(f"{label} returned {type(module).__name__}, not a flax module")
    if net.rnn is not None and not isinstance(module, RecurrentActorCriticNetwork):
        raise ConfigError(f"network.rnn={net.rnn} and {label}: a user's network has the memory "
                          "it has (a carry_size and a carry in and out); leave network.rnn null")
    return _as_actor_critic(label, module, spec, obs_shape)


def purerl_network(obs_shape: Tuple[int, ...], action_spec: ActionSpec,
                   network_config: NetworkConfig, *,
                   obs_bounds: Optional[Tuple[Any, Any]] = None,
                   plan: ExecutionPlan = PLAIN, value_inputs: int = 0) -> nn.Module:
    """purerl's own actor-critic, a `NetworkFactory` (the keywords have defaults): an MLP, CNN
    or quantizing torso with a policy and a value head, shared or two towers, with a GRU or
    LSTM after the torso when `network_config.rnn` names one. purerl calls it with the
    observations' bounds and the run's plan; named as `network.factory` (or called by a
    factory of a user's) it builds the plain plan's network, and no quantizing torso.

    Args:
        obs_shape: one observation's shape.
        action_spec: the policy's actions.
        network_config: the `network` settings.
        obs_bounds: `(low, high)` of what the network reads, each broadcastable to
            `obs_shape`, which a quantizing torso (`vocab_size`) scales by.
        plan: the execution plan (`conv_patch_matmul`, `towers_apart`).
        value_inputs: > 0: the value tower reads the observation vector's first this many
            entries, the policy tower the rest (two MLP towers only).

    Returns:
        An `ActorCritic`, or a `purerl.nets.recurrent.RecurrentActorCritic`.

    Raises:
        ConfigError: a CNN does not fit the observations, or `value_inputs` with a shared
            trunk, a CNN or a quantizing torso.
    """
    net = network_config
    if value_inputs and (net.shared or net.conv_channels or net.vocab_size):
        raise ConfigError("the value tower reads its own input (marl.critic=central), which "
                          "needs two MLP towers: network.shared=false, no conv_channels or "
                          "vocab_size")
    if net.conv_channels:
        if len(obs_shape) not in (2, 3):
            raise ConfigError(
                f"network.conv_channels={list(net.conv_channels)} (network=cnn) needs image "
                f"observations [H, W] or [H, W, C]; the env gives shape {obs_shape}")
        _check_convolutions_fit(net, *obs_shape[:2])
    bounds = {}
    if net.vocab_size and obs_bounds is None:
        raise ConfigError(f"network.vocab_size={net.vocab_size} quantizes observations within "
                          "their bounds, which purerl gives its own network only: leave "
                          "network.factory null")
    if net.vocab_size:  # quantized within the bounds of what the network sees
        bounds = {key: tuple(np.broadcast_to(np.asarray(limit, np.float64),
                                             obs_shape).ravel().tolist())
                  for key, limit in zip(("low", "high"), obs_bounds)}
    settings = dict(num_outputs=action_spec.num_outputs, hidden_sizes=tuple(net.hidden_sizes),
                    activation=net.activation, shared=net.shared,
                    gaussian=action_spec.kind == "gaussian",
                    conv_channels=tuple(net.conv_channels), conv_kernels=tuple(net.conv_kernels),
                    conv_strides=tuple(net.conv_strides), conv_padding=tuple(net.conv_padding),
                    vocab_size=net.vocab_size, embed_dim=net.embed_dim,
                    obs_low=bounds.get("low", ()), obs_high=bounds.get("high", ()),
                    conv_patch_matmul=plan.conv_patch_matmul, towers_apart=plan.towers_apart,
                    value_inputs=value_inputs)
    if net.rnn is not None:
        return RecurrentActorCritic(**settings, cell=net.rnn, rnn_size=net.rnn_size)
    return ActorCritic(**settings)


def _as_actor_critic(label: str, module: nn.Module, spec: ActionSpec,
                     obs_shape: Tuple[int, ...]) -> nn.Module:
    """A user's module as the agent calls it, checked on a batch of 2 observations: as it is
    when it is an `ActorCriticNetwork` or a `RecurrentActorCriticNetwork`, else wrapped (a
    `UserRecurrentActorCritic` for a module with a `carry_size`, else a `UserActorCritic`);
    raises ConfigError naming the shapes when they are not what purerl needs."""
    gaussian = spec.kind == "gaussian"
    recurrent = isinstance(module, RecurrentActorCriticNetwork)
    whole = recurrent or isinstance(module, ActorCriticNetwork)
    carry_size = getattr(module, "carry_size", None)
    if carry_size is not None and (not isinstance(carry_size, int) or carry_size <= 0):
        raise ConfigError(f"{label}: its network's carry_size={carry_size!r} must be a positive "
                          "int (the width of the carry it takes and returns)")
    obs = jax.ShapeDtypeStruct((2, *obs_shape), jnp.float32)
    inputs = (obs,) if carry_size is None else (
        jax.ShapeDtypeStruct((2, carry_size), jnp.float32), obs)
    if recurrent:
        inputs += (jax.ShapeDtypeStruct((2,), jnp.bool_),)
    shown = f"observations [2, {', '.join(map(str, obs_shape))}]" + (
        "" if carry_size is None else f" after a carry [2, {carry_size}]")
    try:
        outputs = jax.eval_shape(
            lambda *args: module.init_with_output(jax.random.key(0), *args)[0], *inputs)
    except Exception as error:
        raise ConfigError(f"{label}: its network fails on {shown}: "
                          f"{' '.join(str(error).split())}") from None
    names = "(policy_out, value, ...)" if carry_size is None else "(carry, policy_out, value)"
    carried = carry_size is not None
    if not isinstance(outputs, (tuple, list)) or len(outputs) < 2 + carried:
        raise ConfigError(f"{label}: its network returns {type(outputs).__name__}; purerl needs "
                          f"a tuple {names}")
    policy_out, value = outputs[carried:carried + 2]
    if whole and gaussian:  # a whole actor-critic gives a Gaussian's (mean, log_std)
        policy_out = policy_out[0] if isinstance(policy_out, (tuple, list)) else None
    want = ((2, spec.num_outputs), (2,))
    got = tuple(tuple(getattr(x, "shape", ())) for x in (policy_out, value))
    carry_out = tuple(getattr(outputs[0], "shape", ())) if carried else None
    if got != want or carry_out not in (None, (2, carry_size)):
        what = "means" if gaussian else "logits"
        carries = "" if not carried else f"carry {list(carry_out)}, "
        wanted = "" if not carried else f"carry [2, {carry_size}], "
        raise ConfigError(
            f"{label}: its network maps {shown} to {carries}policy output {list(got[0])} and "
            f"value {list(got[1])}; purerl needs {wanted}{what} {list(want[0])} and value "
            f"{list(want[1])}")
    if whole:
        return module
    if carried:
        return UserRecurrentActorCritic(module, spec.num_outputs, carry_size, gaussian)
    return UserActorCritic(module, spec.num_outputs, gaussian)


def _check_convolutions_fit(net, height: int, width: int) -> None:
    """Raises ConfigError when a VALID convolution of `net` (a `NetworkConfig`) gets an input
    smaller than its kernel, given `[height, width]` observations."""
    h, w = height, width
    layers = zip(net.conv_kernels, net.conv_strides, net.conv_padding)
    for i, (kernel, stride, padding) in enumerate(layers, 1):
        if padding == "VALID" and min(h, w) < kernel:  # SAME pads: never below 1 x 1
            raise ConfigError(
                f"network.conv_kernels={list(net.conv_kernels)}, conv_strides="
                f"{list(net.conv_strides)}, conv_padding={list(net.conv_padding)} do not fit "
                f"{height}x{width} observations: convolution {i} ({kernel}x{kernel}, stride "
                f"{stride}, {padding}) gets {h}x{w}, smaller than its kernel")
        h, w = (conv_output_size(size, kernel, stride, padding) for size in (h, w))
