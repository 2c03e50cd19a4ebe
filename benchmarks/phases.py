"""Where a CartPole training run's time goes: rollout vs minibatch steps.

    python benchmarks/phases.py [--num-envs 4] [--num-seeds 8 --timesteps 100000]

Times the whole-run program at 1, 2 and 4 epochs (4 minibatches each, everything else at
PureJaxRL's setting) and fits time = rollout + epochs x epoch_cost by least squares: the
intercept is the rollout, GAE and per-update work; the slope is one epoch of minibatch steps.
Also reports the learner's arithmetic rate (forward + backward FLOPs of the MLP towers, of all
seeds). With `--num-seeds` the seeds are vmapped in one program, as `num_seeds=` trains them:
the per-step figures are then of all seeds together.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

from purerl.config import Config, EnvConfig
from purerl.parallel.program import make_train


def mlp_flops_per_sample(obs_dim: int, hidden: list[int], num_actions: int) -> int:
    """Forward FLOPs of the two towers (2 per multiply-add); backward is counted as twice that."""
    sizes_pi = [obs_dim, *hidden, num_actions]
    sizes_v = [obs_dim, *hidden, 1]
    macs = sum(a * b for a, b in zip(sizes_pi, sizes_pi[1:])) + sum(
        a * b for a, b in zip(sizes_v, sizes_v[1:]))
    return 2 * macs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--num-seeds", type=int, default=1)
    parser.add_argument("--timesteps", type=int, default=500_000, help="env steps per seed")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    epochs, times = [1, 2, 4], []
    for num_epochs in epochs:
        config = Config(total_timesteps=args.timesteps, num_seeds=args.num_seeds,
                        env=EnvConfig(name="CartPole-v1", num_envs=args.num_envs))
        config.ppo.num_epochs = num_epochs
        train = jax.jit(make_train(config)).lower(jax.random.key(0)).compile()
        best = float("inf")
        for i in range(args.repeats):
            start = time.perf_counter()
            jax.block_until_ready(train(jax.random.key(i)))
            best = min(best, time.perf_counter() - start)
        times.append(best)
    slope, intercept = np.polyfit(epochs, times, 1)
    updates = config.num_updates
    samples_per_epoch = args.num_seeds * updates * config.batch_size
    flops = 3 * mlp_flops_per_sample(4, config.network.hidden_sizes, 2) * samples_per_epoch
    result = {
        "num_envs": args.num_envs,
        "num_seeds": args.num_seeds,
        "updates": updates,
        "train_s_by_epochs": dict(zip(map(str, epochs), [round(t, 3) for t in times])),
        "rollout_and_gae_s": round(intercept, 3),
        "one_epoch_s": round(slope, 3),
        "minibatch_step_us": round(1e6 * slope / (updates * config.ppo.num_minibatches), 1),
        "learner_gflops_per_s": round(flops / slope / 1e9, 1),
        "rollout_step_us": round(1e6 * intercept / (updates * config.ppo.num_steps), 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
