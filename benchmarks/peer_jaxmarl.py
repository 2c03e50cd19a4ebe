"""JaxMARL's IPPO baseline (`baselines/IPPO/ippo_ff_mpe.py`) as shipped or lean, or purerl
matching it, for `peers.py --peer jaxmarl`: `PYTHON peer_jaxmarl.py SIDE PROGRAM OUT`, the
checkout's root in `$PEER_CHECKOUT` (benchmarks/README.md: the settings, the sides and what
differs)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import harness  # this file's folder is first on sys.path

SEED, ENV = 0, "MPE_simple_spread_v3"
SCRIPT = "baselines/IPPO/ippo_ff_mpe.py"
# ippo_ff_mpe.yaml's settings (its TOTAL_TIMESTEPS and NUM_SEEDS are the program's)
CONFIG = {"LR": 2.5e-4, "NUM_ENVS": 16, "NUM_STEPS": 128, "UPDATE_EPOCHS": 4,
          "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2,
          "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh",
          "ENV_NAME": ENV, "ENV_KWARGS": {}, "ANNEAL_LR": True}
# what the shipped script does after each update, and the lean side leaves out
CALLBACK = "jax.experimental.io_callback(callback, None, metric)"
CURVES = {
    "purerl": "each update's mean team return of the episodes that ended in it",
    "jaxmarl": "JaxMARL's metric: per update, the mean over steps and agents of each agent's "
               "last finished episode's return times the agents (MPELogWrapper), the team's",
}
CURVES["jaxmarl-lean"] = CURVES["jaxmarl"]


def program(total_timesteps: int, num_seeds: int = 1) -> dict:
    return {"setting": "mpe", "env": f"jaxmarl/{ENV}", "num_envs": CONFIG["NUM_ENVS"],
            "total_timesteps": total_timesteps, "num_seeds": num_seeds}


PEERS = {"jaxmarl": harness.Peer(
    "peer_jaxmarl.py", ("jaxmarl", "jaxmarl-lean"),
    {"mpe": [program(10_000_000)], "mpe-seeds": [program(10_000_000, 4)]},
    ["jaxmarl", "jax", "jaxlib", "flax", "optax", "distrax", "numpy"],
    "git clone https://github.com/FLAIROx/JaxMARL, make a venv with jaxmarl==0.2.0 hydra-core "
    "wandb distrax, then --checkout DIR --peer-python PATH", checkout_file=SCRIPT)}


def purerl_config(spec: dict):
    """purerl's `Config` at a program's setting: the preset `mpe-simple-spread`'s, whose
    values are ippo_ff_mpe.yaml's."""
    from purerl.config import Config, EnvConfig, NetworkConfig, PPOConfig

    return Config(total_timesteps=spec["total_timesteps"], num_seeds=spec["num_seeds"],
                  env=EnvConfig(name=spec["env"], num_envs=CONFIG["NUM_ENVS"]),
                  ppo=PPOConfig(num_steps=CONFIG["NUM_STEPS"], lr=CONFIG["LR"]),
                  network=NetworkConfig(hidden_sizes=[64, 64], activation="tanh"))


def jaxmarl_program(spec: dict, lean: bool):
    """`(train, key, env steps per seed, curve)` of the script's `make_train`, its per-update
    callback (a `wandb.log`, wandb initialized disabled as its `main` does) left out when
    `lean`."""
    import types

    import jax

    path = Path(os.environ["PEER_CHECKOUT"]) / SCRIPT
    source = path.read_text()
    if lean:
        assert CALLBACK in source, f"{path} no longer has {CALLBACK}"
        source = source.replace(CALLBACK, "pass")
    module = sys.modules["ippo_ff_mpe"] = types.ModuleType("ippo_ff_mpe")  # flax reads it there
    exec(compile(source, str(path), "exec"), module.__dict__)
    if not lean:
        module.wandb.init(mode="disabled")
    config = dict(CONFIG, TOTAL_TIMESTEPS=spec["total_timesteps"])
    train, key = module.make_train(config), jax.random.PRNGKey(SEED)  # sets NUM_UPDATES
    if spec["num_seeds"] > 1:
        train, key = jax.vmap(train), jax.random.split(key, spec["num_seeds"])
    updates, batch = int(config["NUM_UPDATES"]), config["NUM_STEPS"] * config["NUM_ENVS"]

    def curve(output):
        returns = output["metrics"]["returned_episode_returns"]  # [(S,) U]
        means = returns.reshape(spec["num_seeds"], updates).mean(axis=0)
        return [batch * k for k in range(1, updates + 1)], [float(v) for v in means]

    return train, key, updates * batch, curve


def measure(spec: dict, side: str, launched: float) -> dict:
    harness.start_jax()
    startup_s = harness.seconds_since(launched)
    if side == "purerl":
        run = harness.purerl_side(purerl_config(spec), launched=launched)
    else:
        sys.path.insert(0, str(Path(os.environ["PEER_CHECKOUT"]) / "baselines" / "IPPO"))
        run = harness.program_side(*jaxmarl_program(spec, side == "jaxmarl-lean"), launched)
    return harness.side_result(spec, side, spec["env"], run, kind=CURVES[side],
                               startup_s=startup_s, launched=launched,
                               num_seeds=spec["num_seeds"])


if __name__ == "__main__":
    harness.driver_main(__doc__.splitlines()[0], ("purerl", "jaxmarl", "jaxmarl-lean"), measure)
