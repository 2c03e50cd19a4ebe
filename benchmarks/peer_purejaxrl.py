"""PureJaxRL (`ppo.py`, `ppo_rnn.py`) or purerl matching it, for `peers.py` (its default peer):
`PYTHON peer_purejaxrl.py SIDE PROGRAM OUT`, the checkout's root in `$PEER_CHECKOUT`
(benchmarks/README.md: the programs, the sides and what differs). Keys peers.py adds to a
program: "plan" (purerl: `ExecutionPlan` fields over the plain plan's), "profile" (a folder:
one more run traced there)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import harness  # this file's folder is first on sys.path

SEED, ENV = 0, "CartPole-v1"
CONFIG = {"LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 500_000,
          "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95,
          "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5,
          "ACTIVATION": "tanh", "ENV_NAME": ENV, "ANNEAL_LR": True, "DEBUG": False}
# each network's module, its config (ppo_rnn.py has no ACTIVATION) and its metrics' key
NETWORKS = {"mlp": ("ppo", CONFIG, "metrics"),
            "gru": ("ppo_rnn", {k: v for k, v in CONFIG.items() if k != "ACTIVATION"}, "metric")}
CURVE = "each update's mean return of the episodes that ended in it"


def program(num_envs: int, total_timesteps: int, num_seeds: int = 1, network: str = "mlp"):
    return {"num_envs": num_envs, "total_timesteps": total_timesteps, "num_seeds": num_seeds,
            "network": network}


PEERS = {"purejaxrl": harness.Peer(
    "peer_purejaxrl.py", ("purejaxrl",),
    {"cli": [{"setting": "cli"}], "4envs": [program(4, 500_000)],
     "1024envs": [program(1024, 5_000_000)], "16384envs": [program(16384, 6_291_456)],
     "8seeds": [program(4, 100_000, 8)], "gru": [program(4, 500_000, network="gru")],
     "4096envs": [program(4096, 50_000_000)], "65536envs": [program(65536, 200_000_000)],
     "16seeds": [program(512, 10_000_000, 16)]},
    ["jax", "jaxlib", "flax", "optax", "chex", "distrax", "gymnax", "numpy"],
    "git clone https://github.com/luchris429/purejaxrl, make a venv with its requirements "
    "(benchmarks/README.md) and pass --purejaxrl DIR --peer-python PATH",
    checkout_file="purejaxrl/ppo.py",
    compared_with=dict.fromkeys(("purejaxrl", "purejaxrl-lean"), ("purerl", "purerl-warm")),
    row_sides={"cli": (("purerl", "purerl-warm"), ("purejaxrl", "purejaxrl-lean"))},
    warm_sides=("purerl-warm",), options=("plans", "profile"),
    accelerator_rows=("4096envs", "65536envs", "16seeds"))}


def purerl_config(spec: dict):
    """purerl's `Config` at a program's setting."""
    from purerl.config import Config, EnvConfig, NetworkConfig

    network = (NetworkConfig(rnn="gru", rnn_size=128, hidden_sizes=[128], activation="relu",
                             shared=True) if spec["network"] == "gru" else NetworkConfig())
    return Config(total_timesteps=spec["total_timesteps"], num_seeds=spec["num_seeds"],
                  env=EnvConfig(name=ENV, num_envs=spec["num_envs"]), network=network)


def flax_linen_of_2023():
    """`flax.linen` with its `GRUCell` as `ppo_rnn.py` calls it (flax before its 2023 RNN-cell
    refactor: `GRUCell()` without features, a static `initialize_carry(rng, batch_dims, size)`
    of zeros; PureJaxRL issue #29); the same cell otherwise."""
    import types

    import flax.linen
    import jax.numpy as jnp

    class GRUCell(flax.linen.GRUCell):
        features: int = 0  # read only by the `initialize_carry` this class replaces

        @staticmethod
        def initialize_carry(rng, batch_dims, size):
            return jnp.zeros((*batch_dims, size))

    linen = types.ModuleType("flax.linen")
    linen.__dict__.update(vars(flax.linen))
    linen.GRUCell = GRUCell
    return linen


def purejaxrl_program(spec: dict):
    """`(train, key, env steps per seed, curve)` of PureJaxRL's `make_train`; `curve(output)`
    gives each update's mean return over the seeds' ended episodes."""
    import importlib

    import jax
    import numpy as np

    sys.path.insert(0, str(Path(os.environ["PEER_CHECKOUT"]) / "purejaxrl"))
    name, settings, metrics_key = NETWORKS[spec["network"]]
    module = importlib.import_module(name)
    if spec["network"] == "gru":
        module.nn = flax_linen_of_2023()
    config = dict(settings, NUM_ENVS=spec["num_envs"], TOTAL_TIMESTEPS=spec["total_timesteps"])
    train, key = module.make_train(config), jax.random.PRNGKey(SEED)  # sets NUM_UPDATES
    if spec["num_seeds"] > 1:
        train, key = jax.vmap(train), jax.random.split(key, spec["num_seeds"])
    updates, batch = int(config["NUM_UPDATES"]), config["NUM_STEPS"] * spec["num_envs"]

    def curve(output):
        info = output[metrics_key]  # per step: [(S,) U, T, B]
        ended = np.asarray(info["returned_episode"]).reshape(spec["num_seeds"], updates, -1)
        returns = np.asarray(info["returned_episode_returns"], np.float64).reshape(ended.shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (returns * ended).sum((0, 2)) / ended.sum((0, 2))
        return [batch * k for k in range(1, updates + 1)], means.tolist()

    return train, key, updates * batch, curve


def command_run(spec: dict, side: str) -> dict:
    """The row `cli`: the command a user runs, timed whole in a process of its own; purerl's
    summary.json read for its compile and training."""
    with tempfile.TemporaryDirectory() as work:
        if side.startswith("purerl"):
            cache = os.environ[harness.WARM_CACHE] if side == "purerl-warm" else f"{work}/cache"
            command = [sys.executable, "-m", "purerl.train", "+env=cartpole",
                       f"hydra.run.dir={work}/run", f"compile_cache={cache}"]
            command += [f"total_timesteps={spec['total_timesteps']}"] \
                if spec.get("total_timesteps") else []
            cwd = harness.REPO
        else:
            cwd = Path(os.environ["PEER_CHECKOUT"]) / "purejaxrl"
            source = (cwd / "ppo.py").read_text()
            if spec.get("total_timesteps"):
                source = source.replace('"TOTAL_TIMESTEPS": 5e5',
                                        f'"TOTAL_TIMESTEPS": {spec["total_timesteps"]}')
            if side == "purejaxrl-lean":
                source = source.replace('"DEBUG": True', '"DEBUG": False')
            command = [sys.executable, "-c", f"exec(compile({source!r}, 'ppo.py', 'exec'))"]
        wall_s = harness.timed_run(command, cwd, Path(work) / "log")
        result = {**spec, "side": side, "command_wall_s": round(wall_s, 3)}
        if side.startswith("purerl"):
            summary = json.loads(Path(f"{work}/run/summary.json").read_text())
            result.update({k: summary[k] for k in ("compile_s", "train_s", "sps",
                                                   "final_return")})
    return result


def measure(spec: dict, side: str, launched: float) -> dict:
    if spec.get("setting") == "cli":
        return command_run(spec, side)
    harness.start_jax()
    startup_s = harness.seconds_since(launched)
    profile = Path(spec["profile"]) if spec.get("profile") else None
    if side == "purerl":
        from purerl.plan import PLAIN

        plan = None if spec.get("plan") is None else PLAIN._replace(**spec["plan"])
        run = harness.purerl_side(purerl_config(spec), {"plan": plan}, launched, profile)
    else:
        run = harness.program_side(*purejaxrl_program(spec), launched, profile=profile)
    return harness.side_result(spec, side, ENV, run, kind=CURVE, startup_s=startup_s,
                               launched=launched, num_seeds=spec["num_seeds"])


if __name__ == "__main__":
    harness.driver_main(__doc__.splitlines()[0],
                        ("purerl", "purerl-warm", "purejaxrl", "purejaxrl-lean"), measure)
