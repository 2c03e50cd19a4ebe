"""Throughput of purerl's trainer against raw gymnax env stepping, in one process.

    python benchmarks/throughput.py                      # num_envs 4, 64, 1024 on CartPole-v1
    python benchmarks/throughput.py --num-envs 4096 16384 --out results/throughput_gpu.json
    python benchmarks/throughput.py --plot-only          # redraw the PNG from the JSON

Per num_envs: the whole-run program's compile time (cold, and from JAX's persistent cache), its
training env steps/s, and those of random actions stepping the same envs, no learning (the best
of --repeats, taking turns). Writes a JSON file and a PNG beside it."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
from harness import BENCHMARKS, timed  # this file's folder is first on sys.path
from jax.experimental.compilation_cache import compilation_cache

from purerl.config import Config, EnvConfig
from purerl.envs import make_env
from purerl.logging.history import final_returns
from purerl.parallel.program import make_train
from purerl.validation import validate

COLD_COMPILES = 2  # on a shared machine one compile can take 1.3x another of the same program


def raw_env_program(env, env_params, num_envs: int, num_steps: int, num_rollouts: int,
                    collect: bool = True):
    """`run(key) -> total reward`: `num_rollouts` x `num_steps` steps of `num_envs` envs.

    With `collect`, each rollout keeps its `[T, B]` rewards and dones, the least a trainer must
    keep. Without it each step yields one scalar, which XLA:CPU compiles as one function (under
    `xla_cpu_small_while_loop_byte_threshold`): an upper bound no trainer can reach."""
    step_envs = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    num_actions = env.action_space(env_params).n

    def run(key):
        key, reset_key = jax.random.split(key)
        _, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), env_params)

        def step(carry, _):
            state, key = carry
            key, action_key, env_key = jax.random.split(key, 3)
            action = jax.random.randint(action_key, (num_envs,), 0, num_actions)
            _, state, reward, terminated, truncated, _ = step_envs(
                jax.random.split(env_key, num_envs), state, action, env_params)
            done = (terminated | truncated).astype(reward.dtype)
            return (state, key), ((reward, done) if collect else reward.sum())

        def rollout(carry, _):
            carry, out = jax.lax.scan(step, carry, None, num_steps)
            return carry, (out[0] * (1 - out[1]) if collect else out).sum()

        _, rewards = jax.lax.scan(rollout, (state, key), None, num_rollouts)
        return rewards.sum()

    return run


def measure(env_name: str, num_envs: int, timesteps: int, min_updates: int, repeats: int,
            cache_root: str) -> dict:
    config = Config(env=EnvConfig(name=env_name, num_envs=num_envs))
    config.total_timesteps = max(timesteps, min_updates * config.batch_size)
    validate(config, jax.local_device_count())
    key = jax.random.key(0)
    env, env_params = make_env(config.env)
    # The raw programs first, so that JAX's one-time start-up is not in a compile timed below.
    programs = {name: jax.jit(raw_env_program(env, env_params, num_envs, config.ppo.num_steps,
                                              config.num_updates, collect)).lower(key).compile()
                for name, collect in (("raw", True), ("scalar", False))}
    compile_s = []
    for attempt in range(COLD_COMPILES + 1):  # cold, each into an empty cache; then from it
        if attempt < COLD_COMPILES:
            compilation_cache.reset_cache()
            compilation_cache.set_cache_dir(tempfile.mkdtemp(dir=cache_root))
        start = time.perf_counter()
        programs["train"] = jax.jit(make_train(config)).lower(key).compile()
        compile_s.append(time.perf_counter() - start)
    *cold_s, cached_compile_s = compile_s
    best, outputs = timed(programs, key, repeats)
    _, metrics = outputs["train"]
    final_return = final_returns(np.asarray(metrics.episode_return_sum),
                                 np.asarray(metrics.episode_count))[0]
    env_steps = config.num_updates * config.batch_size
    row = {"num_envs": num_envs, "env_steps": env_steps, "compile_s": round(min(cold_s), 3),
           "cold_compiles_s": [round(t, 3) for t in cold_s],
           "cached_compile_s": round(cached_compile_s, 3), "train_s": round(best["train"], 4),
           "train_sps": round(env_steps / best["train"]),
           "raw_env_sps": round(env_steps / best["raw"]),
           "ratio": round(best["raw"] / best["train"], 4),
           "raw_scalar_output_sps": round(env_steps / best["scalar"]),
           "final_return": None if final_return is None else round(final_return, 1)}
    print(json.dumps(row), flush=True)
    return row


def plot(result: dict, path: Path) -> None:
    """Raw stepping and training steps/s against num_envs, training annotated with its share."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    envs = [r["num_envs"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4.4), layout="constrained")
    ax.plot(envs, [r["raw_env_sps"] for r in rows], "o--", label="raw gymnax stepping")
    ax.plot(envs, [r["train_sps"] for r in rows], "o-",
            label="purerl PPO training (its share of raw stepping)")
    for r in rows:
        ax.annotate(f"{r['ratio']:.2f}x", (r["num_envs"], r["train_sps"]),
                    textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    ax.set(xscale="log", yscale="log", xlabel="num_envs", ylabel="env steps / s",
           title=f"{result['env']} on {result['device']}")
    ax.set_xticks(envs, [str(n) for n in envs])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.margins(x=0.08)
    ax.grid(True, which="both", alpha=0.3)
    fig.legend(loc="outside lower center", ncols=2, fontsize="small")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4, 64, 1024])
    parser.add_argument("--timesteps", type=int, default=500_000)
    parser.add_argument("--min-updates", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "results" / "throughput.json")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the PNG from the JSON at --out, measuring nothing")
    args = parser.parse_args()
    if args.plot_only:
        return plot(json.loads(args.out.read_text()), args.out.with_suffix(".png"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    cache_root = tempfile.mkdtemp(prefix="purerl_xla_cache_")
    device = jax.devices()[0]
    result = {"env": args.env,
              "device": (f"cpu ({os.cpu_count()} cores)" if device.platform == "cpu"
                         else f"{device.platform}: {device.device_kind}"),
              "num_devices": jax.local_device_count(),
              "host": platform.processor() or platform.machine(), "jax": jax.__version__,
              "rows": [measure(args.env, n, args.timesteps, args.min_updates, args.repeats,
                               cache_root) for n in args.num_envs]}
    shutil.rmtree(cache_root)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
