"""Compiles and runs one side's whole-run training programs, for `peers.py`.

    python benchmarks/peer_driver.py purerl PROGRAMS OUT
    PEER_PYTHON benchmarks/peer_driver.py purejaxrl PROGRAMS OUT --purejaxrl CHECKOUT

PROGRAMS is a JSON list of `{"num_envs", "total_timesteps", "num_seeds"}`; each is built at
PureJaxRL's CartPole setting otherwise (128 steps, 4 epochs x 4 minibatches, two 64x64 tanh
towers, lr 2.5e-4 annealed), then, in order: `jax.jit(train).lower(key)` (timed as lowering),
`.compile()` (timed as compile) and one call of the compiled program up to
`jax.block_until_ready` (timed as training). Several seeds are vmapped: `jax.vmap(train)` over
split keys for PureJaxRL, as its README does; `Config(num_seeds=...)` for purerl. JSON with the
timings and the final returns goes to OUT.

The purejaxrl side imports `make_train` from the checkout's `purejaxrl/ppo.py` (with `DEBUG`
off) and runs under the peer's Python, a venv with gymnax 0.0.x where purerl is not
installed: this file imports nothing of purerl at its top. JAX's persistent compilation cache
is turned off, so that every compile is cold.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

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


def purerl_program(num_envs: int, total_timesteps: int, num_seeds: int):
    """(train, key, env steps of all seeds, episode sums) for purerl; `episode_sums(output)`
    gives the per-seed, per-update return sums and episode counts, `[S, U]` each."""
    import purerl
    from purerl.config import Config, EnvConfig

    config = Config(total_timesteps=total_timesteps, num_seeds=num_seeds,
                    env=EnvConfig(name="CartPole-v1", num_envs=num_envs))
    purerl.validate(config, jax.local_device_count())

    def episode_sums(output):
        _, metrics = output
        return np.asarray(metrics.episode_return_sum), np.asarray(metrics.episode_count)

    env_steps = num_seeds * config.num_updates * config.batch_size
    return purerl.make_train(config), jax.random.key(SEED), env_steps, episode_sums


def purejaxrl_program(checkout: Path, num_envs: int, total_timesteps: int, num_seeds: int):
    """The same as `purerl_program`, for PureJaxRL's `ppo.py` in `checkout`."""
    peer_dir = str(checkout / "purejaxrl")
    if peer_dir not in sys.path:  # ppo.py imports its sibling wrappers.py
        sys.path.insert(0, peer_dir)
    from ppo import make_train

    config = dict(PUREJAXRL_CONFIG, NUM_ENVS=num_envs, TOTAL_TIMESTEPS=total_timesteps)
    train = make_train(config)  # writes NUM_UPDATES and MINIBATCH_SIZE into `config`
    num_updates = int(config["NUM_UPDATES"])
    key = jax.random.PRNGKey(SEED)
    if num_seeds > 1:
        train, key = jax.vmap(train), jax.random.split(key, num_seeds)

    def episode_sums(output):
        info = output["metrics"]  # per step: [(S,) U, T, B]
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


def measure(train, key, env_steps: int, episode_sums) -> dict:
    """Lowering, compile (lowering included) and one run of `train(key)`, timed apart."""
    start = time.perf_counter()
    lowered = jax.jit(train).lower(key)
    lower_s = time.perf_counter() - start
    compiled = lowered.compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    output = jax.block_until_ready(compiled(key))
    train_s = time.perf_counter() - start
    return {
        "env_steps": env_steps,
        "lower_s": round(lower_s, 3),
        "compile_s": round(compile_s, 3),  # lowering included
        "train_s": round(train_s, 3),
        "sps": round(env_steps / train_s),
        "final_return": final_return(*episode_sums(output)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side", choices=["purerl", "purejaxrl"])
    parser.add_argument("programs", type=json.loads)
    parser.add_argument("out", type=Path)
    parser.add_argument("--purejaxrl", type=Path, help="the PureJaxRL checkout (its root)")
    args = parser.parse_args()
    if args.side == "purejaxrl" and args.purejaxrl is None:
        parser.error("the purejaxrl side needs --purejaxrl CHECKOUT")

    jax.config.update("jax_enable_compilation_cache", False)
    # JAX's one-time start-up (backend, jit machinery) is paid here, not in the first compile.
    jax.block_until_ready(jax.jit(lambda x: x + 1)(jnp.zeros(())))
    results = []
    for spec in args.programs:
        sizes = (spec["num_envs"], spec["total_timesteps"], spec["num_seeds"])
        program = (purerl_program(*sizes) if args.side == "purerl"
                   else purejaxrl_program(args.purejaxrl, *sizes))
        results.append(dict(spec, **measure(*program)))
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
