"""purerl's policy and value towers as one batched MLP against two plain MLPs: the learner's
forward and backward pass at a minibatch's shapes, with seeds vmapped as `num_seeds` runs them.

    python benchmarks/towers.py                                  # Breakout-MinAtar's shapes
    python benchmarks/towers.py --inputs 4 --batch 128 --seeds 1  # PureJaxRL's CartPole

`ActorCritic` runs separate policy and value towers over raw inputs as one `MLP` with
`num_towers=2` (kernels `[2, in, out]`, one batched matmul per layer). This times a gradient
step of the mean squared output of that module against the same sizes as two `MLP`s of one tower
with their heads, compiled once each and timed `--repeats` times in turn, and prints the median
microseconds per step of all seeds and their ratio. Nothing is written: it explains a row of
`peer_phases.py`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from purerl.nets.layers import MLP, dense

STEPS = 100  # gradient steps per timed call


class TwoMLPs(nn.Module):
    """The same towers as two one-tower MLPs, each with its linear head: `[N, D] -> [2, N, W]`
    (W the wider head; the narrower padded with zeros, as the batched heads are)."""

    hidden_sizes: Sequence[int]
    head_sizes: Sequence[int]

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        width = max(self.head_sizes)
        outs = [dense(size, 1.0)(MLP(self.hidden_sizes)(x)) for size in self.head_sizes]
        return jnp.stack([jnp.pad(out, ((0, 0), (0, width - out.shape[1]))) for out in outs])


def gradient_steps(module: nn.Module, seeds: int, batch: int, inputs: int):
    """`STEPS` gradient steps of all seeds as one compiled call, and its arguments."""
    x = jax.random.normal(jax.random.key(0), (seeds, batch, inputs))
    params = jax.vmap(module.init)(jax.random.split(jax.random.key(1), seeds), x)

    def loss(params, x):
        return jnp.mean(module.apply(params, x) ** 2)

    def steps(params, x):
        def body(params, _):
            grads = jax.vmap(jax.grad(loss))(params, x)
            return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads), None
        return jax.lax.scan(body, params, None, length=STEPS)[0]

    compiled = jax.jit(steps).lower(params, x).compile()
    jax.block_until_ready(compiled(params, x))  # warm
    return compiled, (params, x)


def step_us(compiled, args) -> float:
    """Microseconds per gradient step of one timed call."""
    start = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    return 1e6 * (time.perf_counter() - start) / STEPS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=400, help="observation size D")
    parser.add_argument("--batch", type=int, default=256, help="minibatch samples per seed")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--actions", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    modules = {"batched": MLP(args.hidden, num_towers=2, head_sizes=(args.actions, 1),
                              head_scales=(0.01, 1.0)),
               "separate": TwoMLPs(args.hidden, (args.actions, 1))}
    programs = {name: gradient_steps(module, args.seeds, args.batch, args.inputs)
                for name, module in modules.items()}
    timings = {name: [] for name in modules}
    for _ in range(args.repeats):  # in turn, so that both see the same machine
        for name, (compiled, call_args) in programs.items():
            timings[name].append(step_us(compiled, call_args))
    medians = {name: statistics.median(values) for name, values in timings.items()}
    print(f"{args.seeds} seeds x {args.batch} samples x {args.inputs} inputs, towers "
          f"{args.hidden}: batched {medians['batched']:.1f} us, two MLPs "
          f"{medians['separate']:.1f} us per step of all seeds; batched / two MLPs "
          f"{medians['batched'] / medians['separate']:.2f}")


if __name__ == "__main__":
    main()
