"""A uniform-random policy's mean episode return on every gymnax preset: the `random` end of
the score ranges in `conf/score_ranges.yaml`, by which `python -m purerl.report` normalizes.

    python benchmarks/random_returns.py                  # every gymnax preset in conf/env/
    python benchmarks/random_returns.py cartpole acrobot

Each preset's env (as `purerl.train +env=<preset>` makes it) plays `--episodes` episodes from
independent resets to their ends, vmapped in one program. Merges into
`benchmarks/results/random_returns.json` and prints each preset's line."""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
from harness import BENCHMARKS
from learning import all_presets

from purerl.cli.preflight import compose_jobs
from purerl.envs import make_env

RESULTS = BENCHMARKS / "results" / "random_returns.json"


def random_returns(env, env_params, key: jax.Array, episodes: int) -> tuple[np.ndarray, int]:
    """`[episodes]` returns of a uniform-random policy, and how many episodes ended."""
    space = env.action_space(env_params)

    def episode(key):
        reset_key, run_key = jax.random.split(key)
        _, state = env.reset(reset_key, env_params)

        def step(carry, key):
            state, total, done = carry
            action_key, step_key = jax.random.split(key)
            _, state, reward, terminated, truncated, _ = env.step(
                step_key, state, space.sample(action_key), env_params)
            return (state, total + jnp.where(done, 0.0, reward),
                    done | terminated | truncated), None

        carry = (state, jnp.float32(0.0), jnp.bool_(False))
        (_, total, done), _ = jax.lax.scan(
            step, carry, jax.random.split(run_key, int(env_params.max_steps_in_episode)))
        return total, done

    totals, done = jax.jit(jax.vmap(episode))(jax.random.split(key, episodes))
    return np.asarray(totals, dtype=np.float64), int(np.asarray(done).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("presets", nargs="*", help="default: every gymnax preset")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for preset in args.presets or all_presets():
        config = compose_jobs([f"+env={preset}"])[0]
        env, env_params = make_env(config.env)
        start = time.perf_counter()
        totals, ended = random_returns(env, env_params, jax.random.key(args.seed), args.episodes)
        results[preset] = {
            "env": config.env.name, "episodes": args.episodes, "ended": ended,
            "max_steps": int(env_params.max_steps_in_episode),
            "random_return": float(totals.mean()),
            "stderr": float(totals.std(ddof=1) / np.sqrt(len(totals))),
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(f"{preset:24s} {config.env.name:26s} {totals.mean():10.4g} "
              f"+- {results[preset]['stderr']:.2g} ({ended}/{args.episodes} ended)", flush=True)
    RESULTS.write_text(json.dumps(dict(sorted(results.items())), indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
