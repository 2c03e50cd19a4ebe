"""A trained policy as one file that runs without purerl: `export_policy(policy, format)`.

The file holds `TrainedPolicy.apply` (the network, the run's observation normalization and the
action choice, the params as constants) at a symbolic batch size `B`:

- a feed-forward policy: `obs [B, *obs_shape] -> action [B, *action_shape]`;
- a recurrent one: `(obs, carry float32 [B, carry_size], episode_start bool [B]) ->
  (action, next_carry)`; the carry is reset to zeros where `episode_start` is True;
- at a temperature above 0, one more input: `key`, uint32 `[2]`, the data of a threefry2x32
  PRNG key (`jax.random.key_data(jax.random.key(seed))` is `[0, seed]`): the action is sampled
  with the noise of that key, as `TrainedPolicy.act(obs, key=key)` samples it.

Observations are those `TrainedPolicy.env` returns (an env's action mask, when it has one, is
their last entries, as purerl's suites append it); a multi-agent env's policy acts for one
agent, its `obs` `[B, *agent_obs_shape]` one agent's (its one-hot id appended with
`marl.agent_id`, before the mask; its group's one-hot first with `marl.share_params=false`),
the policy run once per agent. `stablehlo` is a
`jax.export.Exported`, serialized: `jax.export.deserialize(data).call(...)` runs it with jax
and numpy alone. `onnx` goes through jax2onnx (the `export` extra) for onnxruntime and others.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Callable, List, NamedTuple, Sequence, Tuple

import jax
import numpy as np

from purerl.config import ConfigError

FORMATS = ("stablehlo", "onnx")
SUFFIXES = {"stablehlo": ".stablehlo", "onnx": ".onnx"}
PLATFORMS = ("cpu", "cuda", "rocm", "tpu")  # what `jax.export` lowers for
DEFAULT_PLATFORMS = ("cpu", "cuda")
INSTALL_EXPORT = 'pip install "purerl[export]"'
KEY_IMPL = "threefry2x32"  # the PRNG of the `key` input: jax's default


class Port(NamedTuple):
    """One input or output of an exported policy: its name, dtype and shape (`"B"`: the batch
    size, any at run time)."""

    name: str
    dtype: str
    shape: Tuple

    def __str__(self) -> str:
        return f"{self.name} {self.dtype}[{','.join(map(str, self.shape))}]"


class Signature(NamedTuple):
    """The inputs and outputs of an exported policy, in their order."""

    inputs: List[Port]
    outputs: List[Port]


def check_settings(format: str, temperature: float,
                   platforms: Sequence[str] = DEFAULT_PLATFORMS) -> None:
    """Raises ConfigError, naming the setting, unless `format` is one of `FORMATS` that can
    export at `temperature`, with its converter installed, and `platforms` are among
    `PLATFORMS`.

    Args:
        format: the file's format, one of `FORMATS`.
        temperature: the policy's sampling temperature (0: greedy).
        platforms: the platforms the file is to run on, among `PLATFORMS`.

    Raises:
        ConfigError: a setting does not fit, or onnx's converter (jax2onnx) is not installed.
    """
    if format not in FORMATS:
        raise ConfigError(f"format={format}: must be one of {', '.join(FORMATS)}")
    if temperature < 0:
        raise ConfigError(f"temperature={temperature} must be >= 0")
    unknown = sorted(set(platforms) - set(PLATFORMS))
    if unknown or not platforms:
        raise ConfigError(f"platforms={list(platforms)}: choose among {', '.join(PLATFORMS)}")
    if format != "onnx":
        return
    if temperature > 0:
        raise ConfigError(f"format=onnx and temperature={temperature}: jax2onnx converts "
                          "random numbers only at a fixed batch size; export the greedy policy "
                          "(temperature=0.0), or format=stablehlo to sample")
    if importlib.util.find_spec("jax2onnx") is None:
        raise ConfigError(f"format=onnx needs jax2onnx, not installed: {INSTALL_EXPORT}")


def policy_signature(policy, temperature: float = 0.0) -> Signature:
    """What the file of `export_policy(policy, format, temperature)` takes and returns.

    Args:
        policy: a `TrainedPolicy`.
        temperature: the export's; above 0 adds the `key` input.

    Returns:
        The inputs (`obs`, a recurrent policy's `carry` and `episode_start`, `key`) and
            outputs (`action`, a recurrent policy's `next_carry`), in their order.
    """
    obs = _obs_type(policy)
    inputs = [Port("obs", _dtype(obs), ("B", *obs.shape))]
    if policy.recurrent:
        carry = policy.initial_carry(1)
        inputs += [Port("carry", _dtype(carry), ("B", *carry.shape[1:])),
                   Port("episode_start", "bool", ("B",))]
    if temperature > 0:
        inputs.append(Port("key", "uint32", (2,)))
    outputs = jax.eval_shape(_policy_function(policy, temperature), *map(_example, inputs))
    outputs = outputs if policy.recurrent else (outputs,)
    return Signature(inputs, [Port(name, _dtype(x), ("B", *x.shape[1:]))
                              for name, x in zip(("action", "next_carry"), outputs)])


def export_policy(policy, format: str = "stablehlo", temperature: float = 0.0,
                  platforms: Sequence[str] = DEFAULT_PLATFORMS) -> bytes:
    """`policy` as one file's bytes that run without purerl.

    Args:
        policy: a `TrainedPolicy` (`purerl.load(run)`).
        format: "stablehlo" (a serialized `jax.export.Exported`: jax and numpy load and run
            it) or "onnx" (through jax2onnx, the `export` extra; greedy only).
        temperature: 0.0 exports the mode; above 0, a policy that samples at that temperature
            from its `key` input.
        platforms: what a StableHLO file runs on, among `PLATFORMS`.

    Returns:
        The file's bytes: the function of `policy_signature(policy, temperature)`.

    Raises:
        ConfigError: a format, temperature or platform that cannot be exported, the ONNX
            converter missing, or jax2onnx unable to convert the policy's network.
    """
    check_settings(format, temperature, platforms)
    signature = policy_signature(policy, temperature)
    (batch,) = jax.export.symbolic_shape("B")
    specs = [jax.ShapeDtypeStruct(tuple(batch if d == "B" else d for d in port.shape),
                                  port.dtype) for port in signature.inputs]
    function = _policy_function(policy, temperature)
    if format == "stablehlo":
        return bytes(jax.export.export(jax.jit(function), platforms=tuple(platforms))(
            *specs).serialize())
    return _onnx(function, specs, signature)


def _policy_function(policy, temperature: float) -> Callable:
    """`policy.apply` on positional arrays, in `policy_signature`'s order: `(obs, [carry,
    episode_start], [key])` -> the action (feed-forward) or `(action, next_carry)`."""

    def function(obs, *rest):
        carry, first = rest[:2] if policy.recurrent else (None, None)
        key = None
        if temperature > 0:
            key = jax.random.wrap_key_data(rest[-1], impl=KEY_IMPL)
        action, carry = policy.apply(obs, carry, first, key, temperature)
        return (action, carry) if policy.recurrent else action

    return function


def _onnx(function: Callable, specs, signature: Signature) -> bytes:
    """The ONNX model of `function` at `specs`, its inputs and outputs named as `signature`'s."""
    # jax2onnx: the `export` extra, for ONNX only
    from jax2onnx import to_onnx

    # onnx_ir warns of values whose type it leaves out of the file: intermediate shapes that
    # onnxruntime infers again when it loads the model
    ir_log = logging.getLogger("onnx_ir")
    level = ir_log.level
    ir_log.setLevel(logging.ERROR)
    try:
        model = to_onnx(function, specs, model_name="purerl_policy",
                        input_names=[port.name for port in signature.inputs],
                        output_names=[port.name for port in signature.outputs])
    except Exception as error:
        reason = " ".join(str(error).split())[:300]
        raise ConfigError(f"format=onnx: jax2onnx cannot convert this policy: "
                          f"{type(error).__name__}: {reason}") from None
    finally:
        ir_log.setLevel(level)
    return model.SerializeToString()


def _obs_type(policy) -> jax.ShapeDtypeStruct:
    """The type of one observation as `policy.env` returns it; a multi-agent env's, one
    agent's (the shared policy acts for each agent's lane, `purerl.nets.multi_agent`)."""
    obs, _ = jax.eval_shape(policy.env.reset, jax.random.key(0), policy.env_params)
    return jax.ShapeDtypeStruct(policy.obs_shape, obs.dtype) if policy.agent_names else obs


def _dtype(value) -> str:
    """`value`'s dtype by name ("float32")."""
    return str(np.dtype(value.dtype))


def _example(port: Port) -> jax.ShapeDtypeStruct:
    """`port`'s arrays at a batch of 1."""
    return jax.ShapeDtypeStruct(tuple(1 if d == "B" else d for d in port.shape), port.dtype)
