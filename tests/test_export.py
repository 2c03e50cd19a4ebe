"""`python -m purerl.export` and `purerl.export_policy`: the exported file acts as
`purerl.load(run).act` does on observations drawn from the env (exactly for StableHLO on the
CPU; ONNX within 1e-5 before the argmax), at batch sizes 1 and 37, and runs where only jax and
numpy import."""

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO, cli_env, tiny_config

import purerl
from purerl.config import ConfigError
from purerl.export import export_run, parse_args
from purerl.nets.agent import Memory, make_agent
from purerl.storage.exporting import check_settings, export_policy, policy_signature

# One update each, of 4 envs x 16 steps, on networks of 8 or 16 units
RUNS = {
    "discrete": {"env.normalize_obs": True},
    "multidiscrete": {"env.name": "custom_envs:ComboLock"},
    "box": {"env.name": "Pendulum-v1", "env.normalize_obs": True},
    "recurrent": {"network.rnn": "gru", "network.rnn_size": 8, "network.hidden_sizes": [8],
                  "env.normalize_obs": True},
    # a user's network on an env with an action mask (the observations' last 4 entries)
    "user_network": {"env.name": "custom_envs:AlternatingMask",
                     "network.factory": "custom_networks:small"},
}
BATCHES = (1, 37)
NUM_OBS = 1000
HAS_ONNX = all(importlib.util.find_spec(m) for m in ("jax2onnx", "onnxruntime"))


def needs_onnx(test):
    """An ONNX test: skipped without the export extra, and in the `extras` set, which CI runs
    where it is installed."""
    skip = pytest.mark.skipif(not HAS_ONNX, reason='format=onnx needs the export extra: '
                              'pip install -e ".[export]"')
    return pytest.mark.extras(skip(test))


class Trained(NamedTuple):
    run_dir: Path
    policy: Any  # purerl.load(run_dir)
    obs: np.ndarray  # [NUM_OBS, 37, *obs_shape], 37 envs' steps (`env_observations`)
    first: np.ndarray  # bool [NUM_OBS, 37]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """`trained(kind)`: a run of `RUNS[kind]`, its policy and observations from its env,
    made once per module."""
    made = {}

    def make(kind):
        if kind not in made:
            config = tiny_config(**{"total_timesteps": 64, "ppo.num_epochs": 1,
                                    "ppo.num_minibatches": 1, "eval.num_episodes": 1,
                                    "eval.temperatures": [0.0], "eval.max_steps": 4,
                                    "log.progress": False, "log.tensorboard": False,
                                    **RUNS[kind]})
            run_dir = tmp_path_factory.mktemp(kind)
            purerl.run(config, run_dir)
            policy = purerl.load(run_dir)
            made[kind] = Trained(run_dir, policy, *env_observations(policy, max(BATCHES),
                                                                    NUM_OBS))
        return made[kind]

    return make


def env_observations(policy, num_envs: int, num_steps: int, seed: int = 0):
    """`num_steps` steps of `num_envs` envs as `policy.env` steps them, with random actions:
    observations `[T, N, *obs_shape]` and whether each is its episode's first, bool `[T, N]`."""
    env, params = policy.env, policy.env_params
    space = policy.base_env.action_space(params)

    def step(carry, key):
        obs, state, first = carry
        action_key, step_key = jax.random.split(key)
        action = jax.vmap(space.sample)(jax.random.split(action_key, num_envs))
        next_obs, state, _, terminated, truncated, _ = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(jax.random.split(step_key, num_envs), state,
                                               action, params)
        return (next_obs, state, terminated | truncated), (obs, first)

    def play(key):
        reset_key, steps_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), params)
        start = (obs, state, jnp.ones(num_envs, bool))
        return jax.lax.scan(step, start, jax.random.split(steps_key, num_steps))[1]

    return jax.device_get(jax.jit(play)(jax.random.key(seed)))


def played(policy, obs, first, call, key_data=None):
    """`call(obs, carry, first, key_data) -> (action, carry)` and `policy.act` on the env's
    observations `[T, B, *obs_shape]` (`env_observations`), step after step, each carrying its
    own carry: their `(action, carry)` of every step, as host arrays. `key_data`: sampled at
    temperature 1 with the key data `[key_data, t]` at step t; None: greedy."""
    ours, theirs = [], []
    carry = exported_carry = policy.initial_carry(obs.shape[1])
    for t, (o, f) in enumerate(zip(obs, first)):
        data = None if key_data is None else np.array([key_data, t], np.uint32)
        if policy.recurrent:  # act: a carry of zeros starts an episode
            carry = jnp.where(f[:, None], 0.0, carry)
        key = None if data is None else jax.random.wrap_key_data(data)
        action, carry = policy.act(o, carry, key=key, temperature=0.0 if key is None else 1.0)
        exported, exported_carry = call(o, exported_carry, f, data)
        theirs.append((np.asarray(action), None if carry is None else np.asarray(carry)))
        ours.append((np.asarray(exported), exported_carry))
    return ours, theirs


def batches(trained: Trained):
    """`(obs [T, B, ...], first [T, B])` of B envs for B in `BATCHES`, T x B >= NUM_OBS."""
    for batch in BATCHES:
        steps = -(-NUM_OBS // batch)
        yield trained.obs[:steps, :batch], trained.first[:steps, :batch]


def stablehlo_call(policy, data: bytes):
    """The exported function of `data` as `played` calls it."""
    exported = jax.export.deserialize(data)

    def call(obs, carry, first, key_data):
        args = [obs] + ([carry, first] if policy.recurrent else [])
        args += [] if key_data is None else [key_data]
        out = exported.call(*args)
        return out if policy.recurrent else (out, None)

    return call


@pytest.mark.parametrize("kind", list(RUNS))
def test_stablehlo_acts_exactly_as_load_act(kind, trained):
    """Greedy at batch sizes 1 and 37, and sampled at temperature 1 from the key input at 37:
    the exported file's actions (and carries) equal `act`'s bit for bit."""
    policy = trained(kind).policy
    greedy = stablehlo_call(policy, export_policy(policy))
    for obs, first in batches(trained(kind)):
        ours, theirs = played(policy, obs, first, greedy)
        for (action, carry), (want, want_carry) in zip(ours, theirs):
            np.testing.assert_array_equal(action, want)
            if policy.recurrent:
                np.testing.assert_array_equal(carry, want_carry)
    sampled = stablehlo_call(policy, export_policy(policy, temperature=1.0))
    samples, theirs = played(policy, obs, first, sampled, key_data=7)
    for (action, _), (want, _) in zip(samples, theirs):
        np.testing.assert_array_equal(action, want)
    greedy_actions, sampled_actions = (np.stack([a for a, _ in x]) for x in (ours, samples))
    assert not np.array_equal(greedy_actions, sampled_actions)  # the key is read
    if kind == "user_network":  # the mask, the observations' last 4 entries, is obeyed
        for actions in (greedy_actions, sampled_actions):
            assert np.take_along_axis(obs[..., -4:], actions[..., None], -1).min() == 1.0


def test_the_signature_names_what_the_file_takes(trained):
    policy = trained("recurrent").policy
    signature = policy_signature(policy, temperature=0.5)
    assert [str(port) for port in signature.inputs] == [
        "obs float32[B,4]", "carry float32[B,16]", "episode_start bool[B]", "key uint32[2]"]
    assert [str(port) for port in signature.outputs] == ["action int32[B]",
                                                         "next_carry float32[B,16]"]
    exported = jax.export.deserialize(export_policy(policy, temperature=0.5))
    assert [str(a) for a in exported.in_avals] == ["float32[B,4]", "float32[B,16]", "bool[B]",
                                                   "uint32[2]"]
    assert exported.platforms == ("cpu", "cuda")
    box = policy_signature(trained("box").policy)
    assert [str(port) for port in box.outputs] == ["action float32[B,1]"]


# The blocked modules fail to import; what is left: jax and numpy (and their dependencies)
JAX_ONLY = """
import sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("purerl", "flax", "gymnax"):
            raise ImportError(f"{name} is blocked")
sys.meta_path.insert(0, Blocked())
for name in ("purerl", "flax", "gymnax"):
    try:
        __import__(name)
        raise SystemExit(f"{name} imported")
    except ImportError:
        pass

import jax, numpy as np
with open("policy.stablehlo", "rb") as f:
    policy = jax.export.deserialize(f.read())
inputs = np.load("inputs.npz")
action, carry = policy.call(*(inputs[name] for name in ("obs", "carry", "first", "key")))
np.savez("outputs.npz", action=action, carry=carry)
assert not [m for m in sys.modules if m.split(".")[0] in ("purerl", "flax", "gymnax", "optax")]
"""


def test_a_process_with_only_jax_and_numpy_runs_the_file(trained, tmp_path):
    """`python -I` (no PYTHONPATH, no user site) with purerl, flax and gymnax blocked: the
    recurrent policy sampled at temperature 0.5 gives `act`'s actions and carry."""
    recurrent = trained("recurrent")
    policy = recurrent.policy
    (tmp_path / "policy.stablehlo").write_bytes(export_policy(policy, temperature=0.5))
    obs, first = recurrent.obs[1], recurrent.first[1]
    carry = np.asarray(jax.random.normal(jax.random.key(1), (37, 16)))
    inputs = dict(obs=obs, carry=carry, first=first, key=np.array([3, 4], np.uint32))
    np.savez(tmp_path / "inputs.npz", **inputs)
    result = subprocess.run([sys.executable, "-I", "-c", JAX_ONLY], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = np.load(tmp_path / "outputs.npz")
    action, want_carry = policy.act(obs, np.where(first[:, None], 0.0, carry),
                                    key=jax.random.wrap_key_data(inputs["key"]),
                                    temperature=0.5)
    np.testing.assert_array_equal(outputs["action"], action)
    np.testing.assert_array_equal(outputs["carry"], want_carry)


def onnx_call(data: bytes):
    """The ONNX model of `data` in onnxruntime, called as `played` calls it."""
    import onnxruntime

    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def call(obs, carry, first, key_data):
        feeds = {name: np.asarray(x) for name, x in zip(names, [obs, carry, first])}
        out = session.run(None, feeds)
        return out[0], out[1] if len(out) > 1 else None

    return call


def policy_outputs(policy, recurrent: bool):
    """The policy's output before the action is chosen (logits, or a Gaussian's mean and
    log-std), as a function of the exported file's inputs."""
    agent = make_agent(policy.config.env, policy.config.network, policy.base_env,
                       policy.env_params)

    def outputs(obs, carry=None, first=None):
        memory = Memory(carry, first) if recurrent else None
        return agent.policy_step(policy.params, policy.obs_stats, obs, memory)[0]

    return outputs


@needs_onnx
@pytest.mark.parametrize("kind", list(RUNS))
def test_onnx_acts_as_load_act(kind, trained):
    """The ONNX file in onnxruntime at batch sizes 1 and 37: identical greedy actions (a
    Gaussian's within 1e-5), its carry within 1e-5 of `act`'s; the converted network's outputs
    before the argmax within 1e-5 of JAX's."""
    import onnxruntime
    from jax2onnx import to_onnx

    policy = trained(kind).policy
    call = onnx_call(export_policy(policy, "onnx"))
    (batch_dim,) = jax.export.symbolic_shape("B")
    specs = [jax.ShapeDtypeStruct((batch_dim, *policy.obs_shape), jnp.float32)]
    if policy.recurrent:
        specs += [jax.ShapeDtypeStruct((batch_dim, *policy.initial_carry().shape), jnp.float32),
                  jax.ShapeDtypeStruct((batch_dim,), bool)]
    outputs = policy_outputs(policy, policy.recurrent)
    raw = onnxruntime.InferenceSession(to_onnx(outputs, specs).SerializeToString(),
                                       providers=["CPUExecutionProvider"])
    outputs = jax.jit(outputs)
    raw_names = [i.name for i in raw.get_inputs()]
    for obs, first in batches(trained(kind)):
        ours, theirs = played(policy, obs, first, call)
        carry = policy.initial_carry(obs.shape[1])
        for t, ((action, our_carry), (want, want_carry)) in enumerate(zip(ours, theirs)):
            if np.issubdtype(want.dtype, np.floating):  # a Box
                np.testing.assert_allclose(action, want, rtol=0, atol=1e-5)
            else:
                np.testing.assert_array_equal(action, want)
            args = [obs[t]]
            if policy.recurrent:
                np.testing.assert_allclose(our_carry, want_carry, rtol=0, atol=1e-5)
                args += [np.asarray(carry), first[t]]
                carry = want_carry
            got = raw.run(None, dict(zip(raw_names, args)))
            for a, b in zip(got, jax.tree.leaves(outputs(*args))):
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


@needs_onnx
def test_onnx_refuses_to_sample(trained):
    with pytest.raises(ConfigError, match="format=onnx and temperature=1.0: jax2onnx"):
        export_policy(trained("discrete").policy, "onnx", temperature=1.0)


def test_onnx_without_the_extra_is_one_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "jax2onnx" else real(name, *a))
    with pytest.raises(ConfigError, match=r'format=onnx needs jax2onnx, not installed: '
                                          r'pip install "purerl\[export\]"'):
        check_settings("onnx", 0.0)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "purerl.export", *args], cwd=REPO,
                          env=cli_env(), capture_output=True, text=True, timeout=300)


def test_the_command_line_writes_the_file(trained, tmp_path):
    run_dir, policy = trained("discrete")[:2]
    out = tmp_path / "cartpole.stablehlo"
    result = _cli(f"run={run_dir}", f"out={out}", "platforms=[cpu]")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"wrote {out} (") and "stablehlo for cpu): CartPole-v1" in lines[0]
    assert lines[1:] == ["  inputs:  obs float32[B,4]", "  outputs: action int32[B]"]
    exported = jax.export.deserialize(out.read_bytes())
    assert exported.platforms == ("cpu",)
    obs = np.asarray(jax.random.normal(jax.random.key(0), (5, 4)))
    np.testing.assert_array_equal(exported.call(obs), policy.act(obs)[0])
    help_text = _cli("--help")
    assert help_text.returncode == 0 and "format=stablehlo" in help_text.stdout


@pytest.mark.parametrize("args, message", [
    (["run=/no/such/run"], "run=/no/such/run: no such directory"),
    (["checkpoint=last"], "checkpoint=last must be final or best"),
    (["checkpoint=best"], r"no checkpoints/best/ directory"),
    (["member=1"], r"member=1: .* has 1 member\(s\), 0-0"),
    (["format=tflite"], "format=tflite: must be one of stablehlo, onnx"),
    (["temperature=-1"], "temperature=-1.0 must be >= 0"),
    (["platforms=[gpu]"], r"platforms=\['gpu'\]: choose among cpu, cuda, rocm, tpu"),
    (["format=onnx", "platforms=[cpu]"], "only format=stablehlo has platforms"),
    (["out=/no/such/dir/policy.stablehlo"], "out=/no/such/dir/policy.stablehlo: no such "
                                            "directory /no/such/dir"),
    (["out=."], r"out=\.: is a directory"),
    (["colour=red"], "unknown argument 'colour=red'"),
])
def test_bad_settings_are_refused_naming_them(args, message, trained):
    run_dir = trained("discrete").run_dir
    run = [] if any(a.startswith("run=") for a in args) else [f"run={run_dir}"]
    with pytest.raises(ConfigError, match=message):
        export_run(parse_args(run + args))


def test_a_bad_setting_is_one_line_and_exit_code_2():
    result = _cli("run=.", "format=tflite")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "purerl: error: format=tflite: must be one of stablehlo, onnx"]
