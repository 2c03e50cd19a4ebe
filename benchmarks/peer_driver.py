"""PureJaxRL's peer driver: compiles and runs one side's whole-run programs, for `peers.py`.

    python benchmarks/peer_driver.py purerl PROGRAMS OUT [--profile DIR]
    PEER_PYTHON benchmarks/peer_driver.py purejaxrl PROGRAMS OUT --purejaxrl CHECKOUT

PROGRAMS is a JSON list of `{"num_envs", "total_timesteps", "num_seeds", "network"[, "plan"]}`
at PureJaxRL's CartPole setting otherwise (128 steps, 4 epochs x 4 minibatches, lr 2.5e-4
annealed, entropy 0.01, value clipped). "network" mlp is `ppo.py`'s two 64x64 tanh towers,
purerl's default; gru is `ppo_rnn.py`'s Dense(128) relu embedding and GRU of 128 shared by
policy and value, against purerl's `network=gru` so configured, minibatches of whole envs on
both sides (what stays different: its heads have a Dense(128) relu layer each, purerl's are
linear; its GRU's input kernels are lecun-normal, purerl's orthogonal). "plan" (purerl's side)
sets fields of `purerl.plan.ExecutionPlan` over the plain plan's (`{}`: the plain plan; none:
the platform's). Each program is lowered, compiled and run once, timed apart
(`harness.compile_and_run`); several seeds are `jax.vmap(train)` over split keys for PureJaxRL,
as its README does, `Config(num_seeds=...)` for purerl. JAX's persistent cache is off. The
purejaxrl side imports `make_train` from the checkout's `ppo.py` or `ppo_rnn.py` (`DEBUG` off)
under the peer's Python, where purerl is not installed."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from harness import compile_and_run, start_jax  # this file's folder is first on sys.path

SEED = 0
# The settings of PureJaxRL's `ppo.py` `__main__`, with its per-update printing callback off.
PUREJAXRL_CONFIG = {
    "LR": 2.5e-4,
    "NUM_ENVS": 4,
    "NUM_STEPS": 128,
    "TOTAL_TIMESTEPS": 500_000,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.01,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh",
    "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True,
    "DEBUG": False,
}
# The settings of PureJaxRL's `ppo_rnn.py` `__main__` (it has no ACTIVATION: its network is
# fixed), its callback off too; TOTAL_TIMESTEPS, 5e5 there, is an int here, as NUM_ENVS is.
PUREJAXRL_RNN_CONFIG = {k: v for k, v in PUREJAXRL_CONFIG.items() if k != "ACTIVATION"}
# Each network's module of PureJaxRL, its config, and the key of its output's metrics.
PUREJAXRL_NETWORKS = {"mlp": ("ppo", PUREJAXRL_CONFIG, "metrics"),
                      "gru": ("ppo_rnn", PUREJAXRL_RNN_CONFIG, "metric")}


def purerl_program(num_envs: int, total_timesteps: int, num_seeds: int, network: str,
                   plan: dict | None = None):
    """(train, key, env steps of all seeds, episode sums) for purerl; `episode_sums(output)`
    gives the per-seed, per-update return sums and episode counts, `[S, U]` each. `plan`:
    fields of `purerl.plan.ExecutionPlan` over the plain plan's (None: the platform's plan)."""
    import purerl
    from purerl.config import Config, EnvConfig, NetworkConfig
    from purerl.plan import PLAIN

    networks = {"mlp": NetworkConfig(),  # two 64x64 tanh towers
                "gru": NetworkConfig(rnn="gru", rnn_size=128, hidden_sizes=[128],
                                     activation="relu", shared=True)}
    config = Config(total_timesteps=total_timesteps, num_seeds=num_seeds,
                    env=EnvConfig(name="CartPole-v1", num_envs=num_envs),
                    network=networks[network])
    purerl.validate(config, jax.local_device_count())

    def episode_sums(output):
        _, metrics = output
        return np.asarray(metrics.episode_return_sum), np.asarray(metrics.episode_count)

    env_steps = num_seeds * config.num_updates * config.batch_size
    train = purerl.make_train(config, plan=None if plan is None else PLAIN._replace(**plan))
    return train, jax.random.key(SEED), env_steps, episode_sums


def flax_linen_of_2023():
    """`flax.linen` as `ppo_rnn.py` calls it, for its module global `nn`: with flax 0.12's
    `GRUCell` under the signature it had before flax's 2023 RNN-cell refactor, which
    ppo_rnn.py was written for (on flax 0.12 as is, it fails: PureJaxRL issue #29). It calls
    `nn.GRUCell()` without `features` (the cell's `__call__` takes its width from the carry,
    then as now) and the static `nn.GRUCell.initialize_carry(rng, batch_dims, size)` (zeros
    then; flax 0.12's is a method of a cell with `features`). The same cell, parameters and
    initializers otherwise; nothing else of `flax.linen` changes, nor anything outside
    ppo_rnn.py."""
    import types

    import flax.linen

    class GRUCell(flax.linen.GRUCell):
        features: int = 0  # read by `initialize_carry` only, which this class replaces

        @staticmethod
        def initialize_carry(rng, batch_dims, size):
            return jnp.zeros((*batch_dims, size))

    linen = types.ModuleType("flax.linen")
    linen.__dict__.update(vars(flax.linen))
    linen.GRUCell = GRUCell
    return linen


def purejaxrl_program(checkout: Path, num_envs: int, total_timesteps: int, num_seeds: int,
                      network: str):
    """The same as `purerl_program`, for PureJaxRL's `ppo.py` (mlp) or `ppo_rnn.py` (gru) in
    `checkout`."""
    peer_dir = str(checkout / "purejaxrl")
    if peer_dir not in sys.path:  # ppo.py and ppo_rnn.py import their sibling wrappers.py
        sys.path.insert(0, peer_dir)
    module, settings, metrics_key = PUREJAXRL_NETWORKS[network]
    module = importlib.import_module(module)
    if network == "gru":
        module.nn = flax_linen_of_2023()
    make_train = module.make_train

    config = dict(settings, NUM_ENVS=num_envs, TOTAL_TIMESTEPS=total_timesteps)
    train = make_train(config)  # writes NUM_UPDATES and MINIBATCH_SIZE into `config`
    num_updates = int(config["NUM_UPDATES"])
    key = jax.random.PRNGKey(SEED)
    if num_seeds > 1:
        train, key = jax.vmap(train), jax.random.split(key, num_seeds)

    def episode_sums(output):
        info = output[metrics_key]  # per step: [(S,) U, T, B]
        ended = np.asarray(info["returned_episode"]).reshape(num_seeds, num_updates, -1)
        returns = np.asarray(info["returned_episode_returns"]).reshape(ended.shape)
        return (returns * ended).sum(-1), ended.sum(-1)

    env_steps = num_seeds * num_updates * config["NUM_STEPS"] * num_envs
    return train, key, env_steps, episode_sums


def final_return(return_sums: np.ndarray, counts: np.ndarray) -> float | None:
    """Mean return of the episodes that ended in the last 5% of updates, over all seeds."""
    window = max(1, math.ceil(0.05 * counts.shape[1]))
    count = counts[:, -window:].sum()
    return round(float(return_sums[:, -window:].sum() / count), 1) if count else None


def measure(train, key, env_steps: int, episode_sums, profile: Path | None = None) -> dict:
    """Lowering, compile (lowering included) and one run of `train(key)`, timed apart (and a
    profiled run into `profile`, `harness.compile_and_run`'s)."""
    timings, output = compile_and_run(train, key, profile=profile)
    return {
        "env_steps": env_steps,
        **timings,
        "sps": round(env_steps / timings["train_s"]),
        "final_return": final_return(*episode_sums(output)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side", choices=["purerl", "purejaxrl"])
    parser.add_argument("programs", type=json.loads)
    parser.add_argument("out", type=Path)
    parser.add_argument("--purejaxrl", type=Path, help="the PureJaxRL checkout (its root)")
    parser.add_argument("--work", action="store_true",
                        help="each program's work by primitive from its jaxpr "
                             "(op_profile.jaxpr_work), not compiled or run")
    parser.add_argument("--profile", type=Path,
                        help="a folder: each program also runs once under jax.profiler, into "
                             "its subfolder SIDE_<i> (i from 1), its ops' time per kind in OUT")
    args = parser.parse_args()
    if args.side == "purejaxrl" and args.purejaxrl is None:
        parser.error("the purejaxrl side needs --purejaxrl CHECKOUT")

    start_jax()
    results = []
    for i, spec in enumerate(args.programs, 1):
        settings = (spec["num_envs"], spec["total_timesteps"], spec["num_seeds"],
                    spec.get("network", "mlp"))
        program = (purerl_program(*settings, spec.get("plan")) if args.side == "purerl"
                   else purejaxrl_program(args.purejaxrl, *settings))
        profile = args.profile / f"{args.side}_{i}" if args.profile else None
        if args.work:
            from op_profile import jaxpr_work

            results.append(dict(spec, work=jaxpr_work(program[0], program[1])))
        else:
            results.append(dict(spec, **measure(*program, profile=profile)))
        print(json.dumps(results[-1]), flush=True)
        # Written after each program, so a run stopped at its time limit keeps what it measured.
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
