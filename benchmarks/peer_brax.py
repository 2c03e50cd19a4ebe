"""Trains PPO on Brax's inverted_pendulum and hopper with Brax's own trainer
(`brax.training.agents.ppo.train`) or purerl configured to match, for `peers.py --peer brax`; one
run per process, so that its start-up and peak memory are its own.

    BRAX_PYTHON benchmarks/peer_brax.py brax '{"setting": "inverted_pendulum"}' OUT
    BRAX_PYTHON benchmarks/peer_brax.py brax-lean '{"setting": "hopper"}' OUT
    BRAX_PYTHON benchmarks/peer_brax.py purerl '{"setting": "inverted_pendulum"}' OUT
    BRAX_PYTHON benchmarks/peer_brax.py purerl-eval '{"setting": "inverted_pendulum"}' OUT

All four sides run under the Python of one venv that holds `purerl[brax]` (brax 0.14.2 from
PyPI, jax 0.10.2 as purerl's; `gpu.sh` runs them on a GPU image's jax 0.11.2 with brax's wheels):
purerl's sides need brax for its `env.name=brax/...` adapter.
`peers.py` puts the repository first on PYTHONPATH for purerl's sides, so that they run the
purerl of the checkout it is run from whatever the venv installed. This file imports nothing of
purerl or brax at its top. A program is `{"setting"}` (and `"total_timesteps"` to cut the
budget for a check; `"num_envs"` and `"batch_size"` to scale the setting up on a GPU, the rest
as it is).

The settings. Brax publishes PPO settings per env in its training notebook
(google/brax `notebooks/training.ipynb`, the `train_fn` table; the same table since Brax's v2
envs):

- inverted_pendulum: that table's entry as it stands: num_timesteps 2,000,000, num_evals 20,
  reward_scaling 10, episode_length 1000, normalize_observations, action_repeat 1,
  unroll_length 5, num_minibatches 32, num_updates_per_batch 4, discounting 0.97,
  learning_rate 3e-4, entropy_cost 1e-2, num_envs 2048, batch_size 1024 (its seed 1 is this
  file's 0); the backend the notebook's default, `positional`.
- hopper: the notebook trains hopper with SAC and gives no PPO entry for it (Brax issue #129
  asks for one; none was published). This row takes the PPO setting that the notebook's
  inverted_pendulum, inverted_double_pendulum and ant entries share (reward_scaling 10,
  unroll_length 5, num_minibatches 32, num_updates_per_batch 4, discounting 0.97,
  learning_rate 3e-4, entropy_cost 1e-2), with episode_length 1000, normalize_observations,
  action_repeat 1 and the `positional` backend. What those entries set per env (num_envs 2048
  or ant's 4096, batch_size 1024 or 2048, num_timesteps 2M, 20M or 50M, num_evals 20 or 10)
  is cut to fit a few minutes per side on a 2-core CPU: num_envs 256 and batch_size 256 (an
  update of 40,960 env steps instead of 163,840: more updates in the budget), num_timesteps
  1,000,000, num_evals 5.

Everything else is ppo.train's default in brax 0.14.2 (`BRAX_DEFAULTS`, checked against its
signature when the brax sides start): gae_lambda 0.95, clipping_epsilon 0.3, no value clipping,
vf_loss_coefficient 0.5 (its value loss is `0.5 x vf x` the mean squared error), advantages
normalized per minibatch, no gradient clipping, Adam's defaults (eps 1e-8), no learning-rate
schedule; the networks of `make_ppo_networks`: a policy MLP of 4 x 32 and a value MLP of 5 x
256, swish, lecun-uniform kernels, zero biases; a tanh-squashed Gaussian whose scale the policy
outputs (softplus + 0.001); evaluations of 128 envs for a whole episode_length each.

The layout of an update. Brax's `batch_size` counts sequences of `unroll_length` steps: an
update runs `batch_size x num_minibatches / num_envs` unrolls of `unroll_length` steps in
every env (inverted_pendulum: 16 x 5 = 80 steps in each of 2048 envs, 163,840 env steps), then
`num_updates_per_batch` epochs of `num_minibatches` minibatches of `batch_size` sequences
(1024 x 5 = 5,120 steps). purerl's update is `num_envs x num_steps` with `num_steps = batch_size
x num_minibatches x unroll_length / num_envs` (80 steps of 2048 envs) in `num_epochs =
num_updates_per_batch` epochs of `num_minibatches` minibatches (5,120 steps each): the same env
steps, minibatch steps and samples per minibatch step. What the layouts still make different:
Brax computes GAE inside each minibatch's loss over its 5-step sequences, with the value
network as it is at that step and bootstrapping each sequence from the value of its last next
observation; purerl computes GAE once per update over each env's 80 steps with the rollout's
values, and shuffles single steps into minibatches.

The sides:

- brax: as shipped, `ppo.train(environment=envs.get_environment(env, backend=...), **setting,
  progress_fn=...)`: before training and after each of `num_evals - 1` stretches of training
  (`ceil(num_timesteps / ((num_evals - 1) x update))` updates each, so inverted_pendulum trains
  19 x 163,840 = 3,112,960 steps for its 2M), its evaluator plays 128 envs for 1000 steps
  each (128,000 env steps of inference every stretch; the inverted_pendulum run plays 2.56M
  such steps beside its 3.1M of training). Its curve is `eval/episode_reward` (the 128
  episodes' mean return) at each evaluation, with the wall clock when `progress_fn` receives
  it.
- brax-lean: the same call with `num_evals=0`, `run_evals=False` and
  `log_training_metrics=True` (what Brax's release notes give for training without
  evaluations): one stretch of `ceil(num_timesteps / update)` updates, no evaluation; after
  every update a host callback (`jax.debug.callback`) hands Brax's logger the update's finished
  episodes, and its curve is Brax's `episode/sum_reward` there (the mean return of the last 100
  episodes that ended), with the wall clock when `progress_fn` receives it.
- purerl: `purerl.make_train` with `env.name=brax/<env>`, `env.backend`, the same envs, update
  layout (above), epochs, minibatches, lr (constant), gamma, lambda, clip 0.3, no value clipping,
  entropy and value coefficients, observation normalization (purerl's running mean and
  variance; `env.clip_obs=1e6`, as Brax clips none), no gradient clipping in effect
  (`max_grad_norm=1e10`: purerl's is a global-norm clip that must be > 0), and the same networks
  (a network given to `make_train`: policy 4 x 32 and value 5 x 256 MLPs, swish, lecun-uniform
  kernels, zero biases; purerl's own towers are of one size); the budget brax-lean's. Its curve
  is each update's mean return of the episodes that ended in it. Brax's episode_length 1000
  and action_repeat 1 are what purerl's Brax adapter gives (its time limit, no repeat).
- purerl-eval: the same settings run as a user runs purerl (`purerl.run`: its metrics files,
  TensorBoard events and checkpoints written) with Brax's evaluations: `eval.every` one of the
  brax side's stretches, 128 episodes with sampled actions (`eval.temperatures=[1.0]`, as
  Brax's `deterministic_eval=False`), at the brax side's budget. Its curve is its evaluation's
  mean return, with the wall clock when an event of the run's receives it; its compile time
  the run's own (`summary.json` `compile_s`: until its init and update programs are
  compiled; the evaluation's compile overlaps the first updates), its training time the rest
  of the call. `peers.py` compares Brax as shipped with this side (and with purerl lean).

What stays different, and the work it changes. Reward scaling: purerl has no fixed reward
scale, so its rewards enter unscaled where Brax multiplies them by 10 (with Adam on two
separate towers and no gradient clipping, a constant scale changes only the size of the value
tower's targets). The policy: Brax's is a tanh-squashed Gaussian with a state-dependent scale
(its entropy estimated from one sample), purerl's a Gaussian with a state-independent log-std,
its action clipped to [-1, 1]. Time limits: Brax's GAE masks a truncated step out, purerl
bootstraps it from its true next observation. Resets: Brax's auto-reset restores each env's
first state, purerl draws a fresh one. Adam's eps (1e-8 against 1e-5); the observation
statistics (Brax updates them before the update's epochs, purerl after); the PRNG (threefry
against `unsafe_rbg`). The work per env step is otherwise about the same: a policy pass per
rollout step, and in every minibatch step the policy and the value over the minibatch, forward
and backward; Brax also runs the value over each 5-step sequence's bootstrap observation in
every epoch (4 x 1/5 of a forward pass per step), purerl over every rollout step once (its GAE
reads the rollout's values: one forward pass per step).

Timing. purerl: JAX's persistent cache off, JAX started before timing; lowering + compile
(timed as compile), then one call of the compiled program (timed as training). Brax's `train`
compiles inside, as it goes: its compile time is the sum of JAX's own compile events during the
call (`jax.monitoring`'s tracing, lowering and XLA compile durations of every program it
compiles: the env's reset, the training stretch, the evaluator's unroll), and its training time
the rest of the call, evaluations included on the shipped side (as rejax's shipped evaluations
are inside its program); `before_train_s` is the process's time up to the call plus that
compile time. Brax's own `training/walltime` and `eval/walltime` (each one's first call with its
compile) are kept beside. brax 0.14.2 calls `jax.device_put_replicated`, which jax 0.10 took
out of its namespace (`jax._src.api` keeps the function itself); the brax sides put it back
before they call `train` (`restore_device_put_replicated`), nothing else of JAX or Brax
changed. JSON to OUT as `peer_rejax.py` writes it; time to the return of
`peer_curves.THRESHOLDS` from the wall clock at each point on Brax's sides, from the steady
training rate on purerl's.
"""

from __future__ import annotations

import time

STARTED = time.time()  # before the imports, which a user waits for too

import jax  # noqa: E402
import peer_curves as curves  # noqa: E402  (this file's folder is first on sys.path)
from harness import compile_and_run, purerl_curve, start_jax  # noqa: E402

SEED = 0
# The PPO setting that google/brax notebooks/training.ipynb's inverted_pendulum,
# inverted_double_pendulum and ant entries share.
NOTEBOOK_PPO = {
    "reward_scaling": 10, "episode_length": 1000, "normalize_observations": True,
    "action_repeat": 1, "unroll_length": 5, "num_minibatches": 32, "num_updates_per_batch": 4,
    "discounting": 0.97, "learning_rate": 3e-4, "entropy_cost": 1e-2,
}
# Each row's env, Brax pipeline and `ppo.train` settings (see the docstring).
BRAX_SETTINGS = {
    "inverted_pendulum": {
        "env": "inverted_pendulum", "backend": "positional", "num_timesteps": 2_000_000,
        "num_evals": 20, **NOTEBOOK_PPO, "num_envs": 2048, "batch_size": 1024,
    },
    "hopper": {  # cut: num_envs, batch_size, num_timesteps, num_evals
        "env": "hopper", "backend": "positional", "num_timesteps": 1_000_000,
        "num_evals": 5, **NOTEBOOK_PPO, "num_envs": 256, "batch_size": 256,
    },
}
# `ppo.train`'s and `make_ppo_networks`' defaults in brax 0.14.2 that purerl's side matches.
BRAX_DEFAULTS = {
    "gae_lambda": 0.95, "clipping_epsilon": 0.3, "clipping_epsilon_value": None,
    "vf_loss_coefficient": 0.5, "max_grad_norm": None, "normalize_advantage": True,
    "learning_rate_schedule": None, "num_eval_envs": 128,
}
BRAX_NETWORKS = {"policy_hidden_layer_sizes": (32,) * 4, "value_hidden_layer_sizes": (256,) * 5,
                 "activation": "swish"}
SIDES = ("purerl", "purerl-eval", "brax", "brax-lean")
# What each side's curve is.
CURVES = {
    "purerl": "each update's mean return of the episodes that ended in it",
    "purerl-eval": "purerl's evaluation (eval_return/1.0): the mean return of 128 episodes, "
                   "sampled as Brax's are, after each stretch of training",
    "brax": "Brax's evaluation (eval/episode_reward): the mean return of 128 episodes, before "
            "training and after each stretch of it",
    "brax-lean": "Brax's training metric episode/sum_reward after each update: the mean "
                 "return of the last 100 episodes that ended",
}


def settings_of(spec: dict) -> dict:
    """Brax's settings of a program.

    Args:
        spec: the program: `"setting"` names BRAX_SETTINGS' entry; `"total_timesteps"`, if
            there, replaces its `num_timesteps` and cuts its `num_evals` to at most one evaluation
            per update (as a check's few updates would otherwise each be a stretch of their
            own: Brax trains at least one update per stretch); `"num_epochs"`, if there,
            replaces `num_updates_per_batch`; `"num_envs"` and
            `"batch_size"`, if there, replace the setting's (`gpu.sh`'s larger rows).

    Returns:
        A copy of the settings.
    """
    setting = dict(BRAX_SETTINGS[spec["setting"]])
    setting.update({k: int(spec[k]) for k in ("num_envs", "batch_size") if spec.get(k)})
    if spec.get("total_timesteps"):
        setting["num_timesteps"] = int(spec["total_timesteps"])
        updates = max(1, setting["num_timesteps"] // update_steps(setting))
        setting["num_evals"] = min(setting["num_evals"], 1 + updates)
    if spec.get("num_epochs"):
        setting["num_updates_per_batch"] = int(spec["num_epochs"])
    return setting


def update_steps(setting: dict) -> int:
    """Env steps of one Brax update (a `training_step`): `batch_size` sequences of
    `unroll_length` steps in each of `num_minibatches`, each step `action_repeat` env steps."""
    return (setting["batch_size"] * setting["num_minibatches"] * setting["unroll_length"]
            * setting["action_repeat"])


def brax_schedule(setting: dict, num_evals: int) -> tuple[int, int, int]:
    """How Brax's `ppo.train` splits the budget: `max(num_evals - 1, 1)` stretches of training,
    an evaluation after each (when `num_evals > 0`), each stretch `ceil(num_timesteps /
    (stretches x update))` updates.

    Args:
        setting: Brax's settings (`num_timesteps` and the update's layout).
        num_evals: `ppo.train`'s `num_evals` (0 for the brax-lean side).

    Returns:
        `(stretches, updates per stretch, env steps trained in all)`.
    """
    stretches = max(num_evals - 1, 1)
    update = update_steps(setting)
    updates = -(-setting["num_timesteps"] // (stretches * update))
    return stretches, updates, stretches * updates * update


def purerl_num_steps(setting: dict) -> int:
    """purerl's `ppo.num_steps` for Brax's update layout: each env's steps in one update,
    `batch_size x num_minibatches x unroll_length / num_envs` (Brax asserts that `num_envs`
    divides `batch_size x num_minibatches`)."""
    sequences = setting["batch_size"] * setting["num_minibatches"]
    if sequences % setting["num_envs"]:
        raise ValueError(f"batch_size x num_minibatches = {sequences} is not a multiple of "
                         f"num_envs = {setting['num_envs']}, as Brax's ppo.train requires")
    return sequences // setting["num_envs"] * setting["unroll_length"]


def restore_device_put_replicated() -> None:
    """brax 0.14.2's `ppo.train` calls `jax.device_put_replicated`, which jax 0.10 took out of
    its namespace; the function itself is still `jax._src.api.device_put_replicated`: put it
    back under its old name (a no-op on a jax that has it)."""
    try:
        jax.device_put_replicated  # noqa: B018
    except AttributeError:
        from jax._src import api

        jax.device_put_replicated = api.device_put_replicated


def check_brax_defaults() -> None:
    """Exits with one line when the installed brax's `ppo.train` or `make_ppo_networks`
    defaults differ from BRAX_DEFAULTS and BRAX_NETWORKS, which purerl's side matches."""
    import inspect

    import flax.linen
    from brax.training.agents.ppo import networks, train

    found = {name: p.default for name, p in inspect.signature(train.train).parameters.items()}
    found.update((name, p.default)
                 for name, p in inspect.signature(networks.make_ppo_networks).parameters.items())
    if found["activation"] is getattr(flax.linen, BRAX_NETWORKS["activation"]):  # silu's alias
        found["activation"] = BRAX_NETWORKS["activation"]
    expected = {**BRAX_DEFAULTS, **BRAX_NETWORKS}
    if differ := {k: found.get(k) for k, v in expected.items() if found.get(k) != v}:
        raise SystemExit(f"peer_brax.py: this brax's ppo.train defaults differ from those "
                         f"purerl's side matches (measured at brax 0.14.2): {differ}")


class CompileClock:
    """Sums the durations of JAX's compile events (`peer_curves.COMPILE_EVENTS`) reported
    while it is registered, as `jax.monitoring` listener."""

    def __init__(self):
        self.seconds = dict.fromkeys(curves.COMPILE_EVENTS, 0.0)

    def __call__(self, event: str, duration: float, **kwargs) -> None:
        if event in self.seconds:
            self.seconds[event] += duration

    def lowering_s(self) -> float:
        """Seconds of tracing and lowering so far."""
        return sum(self.seconds[e] for e in curves.LOWERING_EVENTS)

    def compile_s(self) -> float:
        """Seconds of tracing, lowering and XLA compile so far."""
        return sum(self.seconds.values())


def brax_run(spec: dict, lean: bool, launched: float) -> dict:
    """Brax's `ppo.train` at a program's setting, as shipped or lean, timed.

    Args:
        spec: the program, `{"setting"}` (and what `settings_of` reads).
        lean: the brax-lean side (no evaluations; its training metrics instead).
        launched: when this process was launched, seconds since the epoch.

    Returns:
        Its timings (`lower_s`, `compile_s`, `train_s`, `before_train_s`, Brax's own
        walltimes), `env_steps`, `evaluations`, and its curve: `steps`, `returns`, `times` (the
        wall clock at each point).
    """
    restore_device_put_replicated()
    check_brax_defaults()
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    setting = settings_of(spec)
    name, backend = setting.pop("env"), setting.pop("backend")
    num_evals = 0 if lean else setting["num_evals"]
    env_steps = brax_schedule(setting, num_evals)[2]
    if lean:
        setting.update(num_evals=0, run_evals=False, log_training_metrics=True)
    key = "episode/sum_reward" if lean else "eval/episode_reward"
    points, last = [], {}

    def progress(step, metrics):
        at = time.time()
        last.update(metrics)
        value = metrics.get(key)
        points.append((int(step), float("nan") if value is None else float(value), at))

    clock = CompileClock()
    jax.monitoring.register_event_duration_secs_listener(clock)
    environment = envs.get_environment(name, backend=backend)
    called = time.time()
    ppo.train(environment=environment, seed=SEED, progress_fn=progress, **setting)
    call_s = time.time() - called
    compile_s = clock.compile_s()
    steps, returns, times = (list(column) for column in zip(*points)) if points else ([],) * 3
    return {"lower_s": round(clock.lowering_s(), 3), "compile_s": round(compile_s, 3),
            "train_s": round(call_s - compile_s, 3),
            "before_train_s": round(called - launched + compile_s, 3),
            **{f"brax_{name}_walltime_s": round(float(last[f"{name}/walltime"]), 3)
               if f"{name}/walltime" in last else None for name in ("training", "eval")},
            "env_steps": env_steps,
            "evaluations": 0 if lean else (num_evals > 1) + max(num_evals - 1, 1),
            "steps": steps, "returns": returns, "times": times}


def brax_sized_network(setting: dict):
    """The networks of Brax's `make_ppo_networks` as a purerl network factory: a policy MLP and
    a value MLP of BRAX_NETWORKS' sizes and activation, lecun-uniform kernels and zero biases
    on every layer, the policy's output the Gaussian's mean (purerl learns its log-std).

    Args:
        setting: the row's settings (unused: every row has Brax's default networks).

    Returns:
        `factory(obs_shape, action_spec, network_config) -> flax module`, as `make_train`'s
        `network=` takes it.
    """
    import flax.linen as nn

    del setting
    activation = getattr(nn, BRAX_NETWORKS["activation"])

    def mlp(x, sizes):
        *hidden, out = sizes
        for size in hidden:
            x = activation(nn.Dense(size, kernel_init=nn.initializers.lecun_uniform())(x))
        return nn.Dense(out, kernel_init=nn.initializers.lecun_uniform())(x)

    class BraxTowers(nn.Module):
        num_outputs: int

        @nn.compact
        def __call__(self, obs):
            mean = mlp(obs, (*BRAX_NETWORKS["policy_hidden_layer_sizes"], self.num_outputs))
            value = mlp(obs, (*BRAX_NETWORKS["value_hidden_layer_sizes"], 1))
            return mean, value[:, 0]

    def factory(obs_shape, action_spec, network_config):
        del obs_shape, network_config
        return BraxTowers(action_spec.num_outputs)

    return factory


def purerl_config(spec: dict, env_steps: int):
    """purerl's settings matching a Brax program's.

    Args:
        spec: the program, `{"setting"}` (and what `settings_of` reads).
        env_steps: the budget (the brax-lean side's, as Brax rounds it).

    Returns:
        The `purerl.config.Config`.
    """
    from purerl.config import Config, EnvConfig, PPOConfig

    setting = settings_of(spec)
    if (setting["episode_length"], setting["action_repeat"]) != (1000, 1):
        raise ValueError("purerl's Brax adapter (env.name=brax/...) runs episodes of 1000 "
                         "steps without action repeat; this setting asks for "
                         f"{setting['episode_length']} and {setting['action_repeat']}")
    return Config(
        total_timesteps=env_steps, num_seeds=1,
        env=EnvConfig(name=f"brax/{setting['env']}", backend=setting["backend"],
                      num_envs=setting["num_envs"],
                      normalize_obs=setting["normalize_observations"], clip_obs=1e6),
        ppo=PPOConfig(num_steps=purerl_num_steps(setting),
                      num_epochs=setting["num_updates_per_batch"],
                      num_minibatches=setting["num_minibatches"],
                      lr=setting["learning_rate"], anneal_lr=False,
                      gamma=setting["discounting"], gae_lambda=BRAX_DEFAULTS["gae_lambda"],
                      clip_eps=BRAX_DEFAULTS["clipping_epsilon"], clip_value=False,
                      ent_coef=setting["entropy_cost"],
                      vf_coef=BRAX_DEFAULTS["vf_loss_coefficient"], max_grad_norm=1e10))


def purerl_run(spec: dict, launched: float) -> dict:
    """purerl's whole-run program matching a Brax program, at the brax-lean side's budget,
    compiled and run.

    Args:
        spec: the program, `{"setting"}` (and what `settings_of` reads).
        launched: when this process was launched, seconds since the epoch.

    Returns:
        As `brax_run`, `times` None (time to the return is read off the steady rate), and
        `purerl` (the path of the purerl it imported).
    """
    import purerl

    setting = settings_of(spec)
    env_steps = brax_schedule(setting, num_evals=0)[2]
    config = purerl_config(spec, env_steps)
    purerl.validate(config, jax.local_device_count())
    train = purerl.make_train(config, network=brax_sized_network(setting))
    timings, output = compile_and_run(train, jax.random.key(SEED))
    steps, returns = purerl_curve(config, output[1])
    return {**timings, "before_train_s": round(curves.seconds_since(launched)
                                               - timings["train_s"], 3),
            "env_steps": env_steps, "purerl": purerl.__file__,
            "steps": steps, "returns": returns, "times": None}


def purerl_eval_run(spec: dict, launched: float) -> dict:
    """purerl as a user runs it with Brax's evaluations: `purerl.run` with an evaluation of
    128 episodes (actions sampled, as Brax's `deterministic_eval=False`) after each of the
    shipped Brax side's stretches of training, at that side's budget.

    Args:
        spec: the program, `{"setting"}` (and what `settings_of` reads).
        launched: when this process was launched, seconds since the epoch.

    Returns:
        As `brax_run`: compile time as the run's summary gives it (until its init and update
        programs were compiled; the evaluation's compiles while the first updates train),
        training time the rest of the call (evaluations, metrics files and checkpoints
        included), `evaluations`, `purerl`, and its curve with the wall clock at each
        evaluation.
    """
    import tempfile

    import purerl
    from purerl.config import EvalConfig, LogConfig
    from purerl.runs.events import Event

    setting = settings_of(spec)
    _, updates, env_steps = brax_schedule(setting, setting["num_evals"])
    config = purerl_config(spec, env_steps)
    config.eval = EvalConfig(every=updates, num_episodes=BRAX_DEFAULTS["num_eval_envs"],
                             temperatures=[1.0])
    config.log = LogConfig(progress=False)
    config.compile_cache = None  # every compile cold, as on the other sides

    class EvaluationClock(Event):
        """Each evaluation's env steps, mean return and wall clock."""

        def __init__(self):
            self.points = []

        def due(self, run, chunk):
            return chunk.evaluated

        def handle(self, run, chunk):
            value = next(iter(run.history.evals[-1]["returns"].values()))
            self.points.append((run.env_steps, float("nan") if value is None else value,
                                time.time()))

    evaluations = EvaluationClock()
    called = time.time()
    with tempfile.TemporaryDirectory() as run_dir:
        summary = purerl.run(config, run_dir, [evaluations], network=brax_sized_network(setting))
    call_s = time.time() - called
    compile_s = summary["compile_s"]
    steps, returns, times = (list(column) for column in zip(*evaluations.points))
    return {"lower_s": None, "compile_s": round(compile_s, 3),
            "train_s": round(call_s - compile_s, 3),
            "before_train_s": round(called - launched + compile_s, 3),
            "env_steps": env_steps, "evaluations": len(steps), "purerl": purerl.__file__,
            "steps": steps, "returns": returns, "times": times}


def measure(spec: dict, side: str, launched: float) -> dict:
    """One run of a side.

    Args:
        spec: the program, `{"setting"}` (and what `settings_of` reads).
        side: one of SIDES.
        launched: when this process was launched, seconds since the epoch.

    Returns:
        The result, JSON-ready (`peer_curves.side_result`).
    """
    start_jax()
    startup_s = curves.seconds_since(launched)
    if side.startswith("purerl"):
        run = (purerl_eval_run if side == "purerl-eval" else purerl_run)(spec, launched)
    else:
        run = brax_run(spec, side == "brax-lean", launched)
    env = f"brax/{BRAX_SETTINGS[spec['setting']]['env']}"
    return curves.side_result(spec, side, env, run, kind=CURVES[side], startup_s=startup_s,
                              launched=launched)


def main() -> None:
    curves.driver_main(__doc__.splitlines()[0], SIDES, measure, STARTED)


if __name__ == "__main__":
    main()
