"""Loss terms of your own: `ppo.loss_terms=[examples.loss_terms:weight_decay]`.

A term is `fn(params, batch, outputs, hparams) -> (loss, metrics)`. purerl adds `loss` to PPO's
loss in every minibatch step and logs each metric as `loss/<name>` (metrics.jsonl,
TensorBoard, W&B), averaged over the update's minibatches like PPO's own losses.

- `params`: the network's parameters (flax's `{"params": ...}`).
- `batch`: the minibatch, `[N, ...]` fields `obs`, `action`, `log_prob`, `value`,
  `advantages` (normalized), `returns`, and `action_mask` where the env has one.
- `outputs`: the network's output on `batch.obs`: `(policy_out, value [N], *extras)`; the
  extras are what a network of your own returns after those two (`examples/networks.py`).
- `hparams`: the update's `purerl.core.schedules.HyperParams` (scheduled `lr`, `ent_coef`, ...).

    python -m purerl.train +env=cartpole ppo.loss_terms=[examples.loss_terms:weight_decay]
    python -m purerl.train +env=cartpole network.factory=examples.networks:residual_mlp \\
        'ppo.loss_terms=[examples.loss_terms:value_sign]'
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

WEIGHT_DECAY = 1e-4


def weight_decay(params, batch, outputs, hparams):
    """An L2 penalty on the kernels (not the biases or a Gaussian's log-std):
    `WEIGHT_DECAY / 2 * sum(w ** 2)`."""
    del batch, outputs, hparams
    kernels = [leaf for path, leaf in jax.tree_util.tree_leaves_with_path(params)
               if "kernel" in jax.tree_util.keystr(path)]
    squares = sum(jnp.sum(jnp.square(kernel)) for kernel in kernels)
    return 0.5 * WEIGHT_DECAY * squares, {"weight_norm": jnp.sqrt(squares)}


def value_sign(params, batch, outputs, hparams):
    """An auxiliary task for `examples.networks:residual_mlp`'s third output: predict whether
    the return is positive (a logistic loss, weighted 0.1)."""
    del params, hparams
    logit = outputs[2]  # [N]
    labels = (batch.returns > 0).astype(jnp.float32)
    loss = optax.sigmoid_binary_cross_entropy(logit, labels).mean()
    accuracy = jnp.mean((logit > 0) == (labels > 0))
    return 0.1 * loss, {"value_sign": loss, "value_sign_accuracy": accuracy}
