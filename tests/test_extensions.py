"""Extending purerl without editing it: a user's network (`network.factory`, or
`make_program(network=)`) and loss terms (`ppo.loss_terms`, or `make_program(loss_terms=)`),
from Python and through the command line, with everything downstream (evaluation,
checkpoints, resume, `purerl.load`)."""

import json
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO, cli_env, resume_from_checkpoint, run_cli, run_cli_ok, tiny_config

import purerl
from purerl.cli.preflight import preflight
from purerl.config import ConfigError
from purerl.parallel.program import make_program


class Small(nn.Module):
    """A shared MLP given to `make_program` as a module: logits and value."""

    num_outputs: int

    @nn.compact
    def __call__(self, obs):
        x = nn.tanh(nn.Dense(16)(obs.reshape(obs.shape[0], -1)))
        return nn.Dense(self.num_outputs)(x), nn.Dense(1)(x)[:, 0]


def _factory(obs_shape, action_spec, network_config):
    return Small(action_spec.num_outputs)


def _train(config, **given):
    return jax.jit(make_program(config, **given).train)(jax.random.key(0))


@pytest.mark.parametrize("env_name, kind", [("CartPole-v1", "categorical"),
                                            ("custom_envs:ComboLock", "categorical"),
                                            ("custom_envs:Reach", "gaussian")])
def test_a_users_network_from_python_trains_on_each_action_space(env_name, kind):
    """Discrete, MultiDiscrete and Box actions: the factory gets the action spec, its module
    trains (every param moves), and a Gaussian policy's log-std is purerl's own param."""
    seen = []

    def factory(obs_shape, action_spec, network_config):
        seen.append((obs_shape, action_spec.kind, network_config.hidden_sizes))
        return Small(action_spec.num_outputs)

    config = tiny_config(**{"env.name": env_name})
    program = make_program(config, network=factory)
    start = jax.jit(program.init)(jax.random.key(0))
    state, metrics = jax.jit(program.run)(start, np.int32(program.chunk))
    assert seen[0][1:] == (kind, [16, 16]) and len(seen[0][0]) == 1
    assert np.isfinite(np.asarray(metrics.scalars["loss/policy_loss"])).all()
    assert int(np.asarray(metrics.nonfinite).max()) == 0
    assert ("log_std" in state.params["params"]) == (kind == "gaussian")
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), start.params, state.params)
    assert all(jax.tree.leaves(moved))


@pytest.mark.parametrize("factory, message", [
    ("custom_networks:value_with_axis",
     r"maps observations \[2, 4\] to policy output \[2, 2\] and value \[2, 3\]; purerl needs "
     r"logits \[2, 2\] and value \[2\]"),
    ("custom_networks:too_few_logits", r"policy output \[2, 1\] .* needs logits \[2, 2\]"),
    ("custom_networks:carry_grows",
     r"maps observations \[2, 4\] after a carry \[2, 4\] to carry \[2, 6\], policy output "
     r"\[2, 2\] and value \[2\]; purerl needs carry \[2, 4\], logits \[2, 2\]"),
    ("custom_networks:carry_size_not_an_int", r"carry_size=2.5 must be a positive int"),
    ("custom_networks:nowhere", "custom_networks' has no callable 'nowhere'"),
    ("no_such_module:fn", "cannot import 'no_such_module'"),
    ("not a path", "must name a function as pkg.module:function"),
])
def test_a_network_of_other_shapes_is_refused_before_training(factory, message):
    with pytest.raises(ConfigError, match=message):
        preflight(["+env=cartpole", f"network.factory={factory}"])


@pytest.mark.parametrize("override, message", [
    ("ppo.loss_terms=[custom_networks:nowhere]",
     "ppo.loss_terms=custom_networks:nowhere: 'custom_networks' has no callable 'nowhere'"),
    ("ppo.loss_terms=[nowhere]", "ppo.loss_terms: 'nowhere' must name a function"),
    ("algorithm=no_such_module:make", "algorithm=no_such_module:make: cannot import"),
])
def test_loss_terms_and_algorithms_that_do_not_import_are_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        preflight(["+env=cartpole", override])


KL = "algorithm=examples.kl_penalty:make_kl_ppo"


@pytest.mark.parametrize("overrides, message", [
    ([KL, "algorithm.beta=1"], r"algorithm.beta: examples.kl_penalty:make_kl_ppo has no setting "
                               r"'beta' \(its settings: target_kl, kl_beta\)"),
    ([KL, "algorithm.target_kl=abc"], r"algorithm.target_kl='abc' must be a number"),
    ([KL, "algorithm.target_kl=0"], r"its settings target_kl=0.0 must be > 0"),
    ([KL, "algorithm.kl_beta=inf"], r"algorithm.kl_beta=inf must be a finite number"),
    ([KL, "sweep.algorithm.target_kl=[0.1,0.2]"],
     r"sweep.algorithm.target_kl: 'target_kl' is not a hyperparameter of "
     r"examples.kl_penalty:make_kl_ppo \(its hyperparameters: kl_beta\)"),
    ([KL, "sweep.algorithm.kl_beta=[1,1]"], r"sweep.algorithm.kl_beta=\[1.0, 1.0\] has a repeated"),
    (["algorithm.kl_beta=1"], r"algorithm.kl_beta: PPO has no setting 'kl_beta'"),
    ([KL, "algorithm.schedule.target_kl.kind=linear"],
     r"algorithm.schedule.target_kl: 'target_kl' is not a hyperparameter of "),
    ([KL, "algorithm.schedule.kl_beta.kindd=linear"],
     r"algorithm.schedule.kl_beta.kindd: a schedule has no field 'kindd' \(fields: kind, "),
    ([KL, "algorithm.schedule.kl_beta.kind=wobbly"],
     r"algorithm.schedule.kl_beta.kind='wobbly' is not one of constant, linear"),
    (["num_seeds=4", "pbt.every=2", "pbt.hparams=[algorithm.kl_beta]"],
     r"pbt.hparams: algorithm.kl_beta: 'kl_beta' is not a hyperparameter of PPO"),
])
def test_an_algorithms_own_settings_are_checked_before_compiling(overrides, message):
    with pytest.raises(ConfigError, match=message):
        preflight(["+env=cartpole", *overrides])


def test_an_algorithms_settings_and_hyperparameters_from_python():
    """`Config(algorithm="pkg:fn")` is the short spelling of `{"name": ...}`; the declared
    settings reach `make_fn` (hyperparameters as None), and a hyperparameter's values, swept,
    are the members' `hparams.extra` arrays."""
    from examples.kl_penalty import KLPenalty, make_kl_ppo

    assert purerl.Config(algorithm="examples.a2c:make_a2c").algorithm == {
        "name": "examples.a2c:make_a2c"}
    given = []

    def recording(config, env, env_params, *, settings, **parts):
        given.append(settings)
        return make_kl_ppo(config, env, env_params, settings=settings, **parts)

    recording.settings = KLPenalty
    config = tiny_config(algorithm={"name": None, "target_kl": 0.05}, num_seeds=2)
    config.sweep.algorithm = {"kl_beta": [0.5, 3.0]}
    program = make_program(config, algorithm=recording)
    assert given == [KLPenalty(target_kl=0.05, kl_beta=None)]
    np.testing.assert_array_equal(program.hyperparams.extra["kl_beta"], [0.5, 0.5, 3.0, 3.0])
    _, metrics = jax.jit(program.train)(jax.random.key(0))
    np.testing.assert_array_equal(metrics.scalars["kl_beta"][:, 0], [0.5, 0.5, 3.0, 3.0])


def test_a_network_given_from_python_runs_evaluates_and_loads(tmp_path):
    """`purerl.run(..., network=)` and `purerl.load(..., network=)`: the checkpoint holds the
    module's params, and the loaded policy acts and evaluates with them."""
    config = tiny_config(**{"log.progress": False, "log.tensorboard": False,
                            "eval.num_episodes": 2})
    summary = purerl.run(config, tmp_path, network=_factory)
    assert summary["status"] == "completed" and summary["eval_return"] is not None
    policy = purerl.load(tmp_path, network=_factory)
    assert set(policy.params["params"]["network"]) == {"Dense_0", "Dense_1", "Dense_2"}
    action, _ = policy.act(np.zeros((3, 4), np.float32))
    assert action.shape[0] == 3
    assert set(policy.evaluate(episodes=2)) == {"1.0", "0.0"}


@pytest.mark.parametrize("settings", [{}, {"network.rnn": "gru", "network.rnn_size": 8},
                                      {"network.shared": True}])
def test_purerls_own_network_through_the_factory_contract_trains_the_same(settings):
    """`network.factory=purerl.nets.networks:purerl_network` is what purerl builds without a
    factory: the same module, unwrapped, the same results bit for bit (two towers, a GRU, a
    shared trunk); a factory's whole actor-critic (`custom_networks.purerl_wider`) is used as
    it is, its separate towers run alone where the rollout acts."""
    from purerl.envs import make_env
    from purerl.nets.agent import make_agent
    from purerl.nets.networks import ActorCritic, purerl_network
    from purerl.nets.recurrent import RecurrentActorCritic

    config = tiny_config(**settings)
    own = tiny_config(**settings, **{"network.factory": "purerl.nets.networks:purerl_network"})
    kind = RecurrentActorCritic if "network.rnn" in settings else ActorCritic
    assert type(make_agent(own.env, own.network, *make_env(own.env)).network) is kind
    assert type(make_program(config, network=purerl_network).agent.network) is kind
    _, metrics = _train(config)
    _, same = _train(own)
    for a, b in zip(jax.tree.leaves(metrics), jax.tree.leaves(same)):
        np.testing.assert_array_equal(a, b)
    if not settings:
        wider = tiny_config(**{"network.factory": "custom_networks:purerl_wider"})
        network = make_agent(wider.env, wider.network, *make_env(wider.env)).network
        assert isinstance(network, ActorCritic) and network.hidden_sizes == (32, 32)


def test_network_rnn_with_a_users_network_is_refused():
    with pytest.raises(ConfigError, match="network.rnn=gru and network.factory=.*leave "):
        preflight(["+env=cartpole", "network=gru", "network.factory=custom_networks:small"])


def _zero_weight(params, batch, outputs, hparams):
    """A term of weight 0 that logs the batch's mean return and the policy output's width."""
    return 0.0 * jnp.mean(outputs[1]), {"mean_return": batch.returns.mean(),
                                        "logits": jnp.float32(outputs[0].shape[-1])}


def _squared_weights(params, batch, outputs, hparams):
    squares = sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(params))
    return 10.0 * squares, {"squares": squares}


def test_loss_terms_add_to_the_loss_and_log_their_metrics():
    """A zero-weight term leaves training bit-identical and logs its metrics as
    `loss/<name>`; a heavy weight penalty shrinks the params (Adam at lr 1e-2 moves each by
    about 1e-2 a step, 32 steps)."""
    config = tiny_config(**{"ppo.lr": 1e-2, "ppo.anneal_lr": False})
    plain_state, plain = _train(config)
    state, metrics = _train(config, loss_terms=[_zero_weight])
    for a, b in zip(jax.tree.leaves(plain_state.params), jax.tree.leaves(state.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for name in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac"):
        np.testing.assert_array_equal(np.asarray(plain.scalars[f"loss/{name}"]),
                                      np.asarray(metrics.scalars[f"loss/{name}"]))
    assert sorted(set(metrics.scalars) - set(plain.scalars)) == ["loss/logits", "loss/mean_return"]
    np.testing.assert_array_equal(np.asarray(metrics.scalars["loss/logits"]), 2.0)
    assert np.isfinite(np.asarray(metrics.scalars["loss/mean_return"])).all()

    decayed_state, decayed = _train(config, loss_terms=[_squared_weights])
    norm = lambda params: sum(float(jnp.sum(jnp.square(x))) for x in jax.tree.leaves(params))  # noqa: E731
    assert norm(decayed_state.params) < 0.5 * norm(plain_state.params)
    squares = np.asarray(decayed.scalars["loss/squares"])[0]
    assert squares[-1] < squares[0]


def test_a_term_whose_metric_is_not_a_scalar_is_named():
    def per_sample(params, batch, outputs, hparams):
        return 0.0, {"per_sample": batch.returns}

    with pytest.raises(ValueError, match="loss term per_sample: metric 'per_sample' has shape"):
        _train(tiny_config(), loss_terms=[per_sample])


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_the_examples_through_the_command_line(tmp_path):
    """examples/networks.py's residual MLP with both of examples/loss_terms.py's terms: their
    metrics in metrics.jsonl, evaluation, `purerl.load(run).act`, and a resume from a
    checkpoint that ends bit-identical to the uninterrupted run."""
    args = ["+env=cartpole", "network.factory=examples.networks:residual_mlp",
            "ppo.loss_terms=[examples.loss_terms:value_sign,examples.loss_terms:weight_decay]",
            "total_timesteps=1024", "ppo.num_steps=32", "ppo.num_epochs=2",
            "ppo.num_minibatches=2", "network.hidden_sizes=[16,16]", "log.progress=false",
            "log.tensorboard=false", "eval.num_episodes=2", "checkpoint.every=4"]
    run_dir = tmp_path / "run"
    result = run_cli(*args, f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(run_dir)
    assert len(rows) == 8
    for key in ("loss/value_sign", "loss/value_sign_accuracy", "loss/weight_norm"):
        assert all(np.isfinite(row[key]) for row in rows), key
    assert 0 <= rows[-1]["loss/value_sign_accuracy"] <= 1
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["eval_return"] is not None

    policy = purerl.load(run_dir)
    assert "Dense_0" in policy.params["params"]["network"]
    obs, _ = policy.env.reset(jax.random.key(0), policy.env_params)
    action, _ = policy.act(obs[None])
    assert action.shape[0] == 1 and 0 <= int(action.reshape(-1)[0]) < 2

    resume_from_checkpoint(run_dir, tmp_path / "resumed", 4, *args)
    assert _rows(tmp_path / "resumed") == rows


def test_an_algorithm_of_ones_own_through_the_command_line(tmp_path):
    """examples/kl_penalty.py through `algorithm=`: nothing is clipped, beta follows the
    paper's rule after every update, and the policy learns CartPole (a random policy's return
    is about 22), in training and in the final evaluation."""
    from examples.kl_penalty import KLPenalty

    target_kl = KLPenalty().target_kl
    result = run_cli("+env=cartpole", "algorithm=examples.kl_penalty:make_kl_ppo",
                     "total_timesteps=65536", "log.progress=false", "log.tensorboard=false",
                     f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(tmp_path)
    assert len(rows) == 128 and rows[0]["kl_beta"] == KLPenalty().kl_beta
    for row, after in zip(rows, rows[1:]):
        kl, beta = row["loss/approx_kl"], row["kl_beta"]
        factor = 0.5 if kl < target_kl / 1.5 else 2.0 if kl > target_kl * 1.5 else 1.0
        assert after["kl_beta"] == pytest.approx(beta * factor, rel=1e-6)
        # nothing is clipped: PPO's clip range and clip fraction are not logged
        assert "clip_eps" not in row and "loss/clip_frac" not in row and "clip_frac" not in row
    returns = [r["episode_return"] for r in rows[-16:] if r["episode_return"] is not None]
    assert np.mean(returns) > 150
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["eval_return"]["1.0"] > 150


def test_pbt_evolves_an_algorithms_own_hyperparameter(tmp_path):
    """`sweep.algorithm.kl_beta` and `pbt.hparams=[algorithm.kl_beta]` from the command line:
    the grid points name it, and each member a generation replaced holds its donor's beta
    times one of the perturb factors."""
    result = run_cli("+env=cartpole", KL, "algorithm.target_kl=0.02",
                     "sweep.algorithm.kl_beta=[0.5,2.0]", "num_seeds=2", "pbt.every=4",
                     "pbt.fraction=0.5", "pbt.hparams=[algorithm.kl_beta]", "pbt.perturb=[0.5,3]",
                     "total_timesteps=512", "ppo.num_steps=16", "network.hidden_sizes=[8]",
                     "log.progress=false", "log.tensorboard=false", "eval.num_episodes=1",
                     f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["config"]["algorithm"] == {"name": KL.split("=")[1], "target_kl": 0.02}
    assert [m["hparams"] for m in summary["members"]] == [{"algorithm.kl_beta": 0.5}] * 2 + [
        {"algorithm.kl_beta": 2.0}] * 2
    rows = [json.loads(line) for line in (tmp_path / "pbt.jsonl").read_text().splitlines()]
    assert [row["update"] for row in rows] == [4]
    beta = rows[0]["hparams"]["algorithm.kl_beta"]
    assert len(rows[0]["copies"]) == 2
    for copy in rows[0]["copies"]:
        assert beta[copy["member"]] / beta[copy["from"]] in (pytest.approx(0.5), pytest.approx(3))


def test_evaluation_and_load_act_with_the_algorithms_own_agent(tmp_path):
    """An algorithm that trains a network of its choosing (not the `network` settings'):
    the run's evaluation, `python -m purerl.evaluate` and `purerl.load` act with that
    algorithm's agent, read from the program rather than rebuilt from the settings."""
    run_cli_ok("+env=cartpole", "algorithm=custom_algorithms:ppo_on_its_own_network",
               "total_timesteps=512", "ppo.num_steps=32", "eval.num_episodes=2",
               "log.progress=false", "log.tensorboard=false", f"hydra.run.dir={tmp_path}")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["eval_return"]["1.0"] > 0
    policy = purerl.load(tmp_path)
    assert set(policy.params["params"]) == {"network"}  # custom_networks.small's Dense layers
    assert set(policy.params["params"]["network"]) == {"Dense_0", "Dense_1", "Dense_2"}
    obs, _ = policy.env.reset(jax.random.key(0), policy.env_params)
    assert policy.act(obs[None])[0].shape == (1,)
    evaluated = subprocess.run([sys.executable, "-m", "purerl.evaluate", f"run={tmp_path}",
                                "episodes=2"], cwd=REPO, env=cli_env(), capture_output=True,
                               text=True, timeout=600)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "temperature" in evaluated.stdout


def test_a2c_an_algorithm_that_is_not_ppo_solves_cartpole(tmp_path):
    """examples/a2c.py through `algorithm=`: one optimizer step per update on the plain
    policy gradient (nothing clipped, PPO's clip range not logged), at A2C's n-step returns
    (`gae_lambda=1`); 4 vmapped seeds end at a mean return of 475 or more, in training and in
    the final evaluation."""
    result = run_cli("+env=cartpole", "algorithm=examples.a2c:make_a2c", "ppo.lr=7e-4",
                     "ppo.num_steps=8", "ppo.gae_lambda=1.0", "env.num_envs=16", "num_seeds=4",
                     "total_timesteps=1000000", "log.progress=false", "log.tensorboard=false",
                     f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(tmp_path)
    assert len(rows) == 7812 and all(row["opt_steps"] == 1 for row in rows)
    assert "clip_eps" not in rows[0] and "loss/clip_frac" not in rows[0]
    assert {"loss/policy_loss", "loss/value_loss", "loss/entropy"} <= set(rows[0])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["final_return"] >= 475
    assert summary["eval_return"]["1.0"] >= 475


def test_a_value_phase_a_learner_of_another_structure_solves_cartpole(tmp_path):
    """examples/value_phase.py through `algorithm=`: each update takes PPO's 4 x 4 steps, then
    `VALUE_EPOCHS` x 4 of the value phase; 4 vmapped seeds end at a mean return of 475 or more,
    in training and in the final evaluation."""
    from examples.value_phase import VALUE_EPOCHS

    result = run_cli("+env=cartpole", "algorithm=examples.value_phase:make_value_phase_ppo",
                     "ppo.lr=5e-4", "num_seeds=4", "total_timesteps=1000000",
                     "log.progress=false", "log.tensorboard=false", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(tmp_path)
    assert all(row["opt_steps"] == 4 * 4 + VALUE_EPOCHS * 4 for row in rows)
    assert {"loss/policy_loss", "loss/value_phase_loss"} <= set(rows[0])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["final_return"] >= 475
    assert summary["eval_return"]["1.0"] >= 475


def test_a_sweep_of_a_setting_a_users_algorithm_reads_compiles_each_value(tmp_path):
    """A user's algorithm may read any setting as a Python number (here `ppo.clip_eps`, which
    PPO takes as an argument of its programs): each job of a Hydra sweep over it runs programs
    built with its own value, not an earlier job's."""
    result = run_cli("-m", "+env=cartpole", "algorithm=custom_algorithms:clip_eps_read_at_build",
                     "ppo.clip_eps=0.1,0.3", "total_timesteps=256", "ppo.num_steps=32",
                     "network.hidden_sizes=[8]", "log.progress=false", "log.tensorboard=false",
                     "eval.num_episodes=1", f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    for job, clip_eps in ((0, 0.1), (1, 0.3)):
        rows = _rows(tmp_path / str(job))
        assert [(r["clip_eps"], r["loss/clip_eps_read"]) for r in rows] == [(clip_eps,) * 2] * 2
        assert json.loads((tmp_path / str(job) / "summary.json").read_text())["compile_s"] > 0
