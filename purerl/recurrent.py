"""Policies with memory: GRU and LSTM cells after the torso, the actor-critic around them.

A recurrent actor-critic carries one float32 array per env, `carry [B, carry_size]`: the
cells' states side by side (the policy tower's, then the value tower's when it has its own
cell). Zeros are the initial state. Every call takes `first [B]` (or `[T, B]`), whether an
observation is the first of its episode: there the carry is reset to zeros before the cell
reads it, so a carry left over from the previous episode never reaches the next one.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from purerl.networks import ActorCriticBase, _dense, orthogonal

CELLS = ("gru", "lstm")
_GATES = {"gru": 3, "lstm": 4}  # gate blocks of the input and recurrent kernels
_STATES = {"gru": 1, "lstm": 2}  # [H]-sized states per cell: h; c and h


def _forget_bias_one(size: int):
    """An LSTM's bias `[4H]`, gates (i, f, g, o): zero but for the forget gate's ones (so
    that a fresh cell keeps its state; Jozefowicz et al. 2015)."""

    def init(key, shape, dtype=jnp.float32):
        return jnp.zeros(shape, dtype).at[size:2 * size].set(1.0)

    return init


class CellWeights(NamedTuple):
    """What one recurrent step reads: the recurrent kernel `[H, G*H]` and, for a GRU, the
    bias of its candidate's recurrent part `[H]`."""

    recurrent_kernel: jax.Array
    recurrent_bias: Any


class Cell(nn.Module):
    """A GRU or LSTM layer of `size` units, its input projection apart from its recurrence:
    `project` maps features `[N, D] -> [N, G*H]`, `weights()` gives what `cell_step` needs. Kernels orthogonal (gain 1; the recurrent one per
    gate block), biases zero (an LSTM's forget gate one)."""

    kind: str  # gru | lstm
    size: int

    def setup(self):
        gates, size = _GATES[self.kind], self.size
        self.input_projection = nn.Dense(
            gates * size, kernel_init=orthogonal(1.0),
            bias_init=(_forget_bias_one(size) if self.kind == "lstm"
                       else nn.initializers.zeros))
        self.recurrent_kernel = self.param(
            "recurrent_kernel", orthogonal(1.0, batch_ndim=1), (gates, size, size))
        if self.kind == "gru":
            self.recurrent_bias = self.param("recurrent_bias", nn.initializers.zeros, (size,))

    def project(self, x: jax.Array) -> jax.Array:
        return self.input_projection(x)

    def weights(self) -> CellWeights:
        gates, size = _GATES[self.kind], self.size
        kernel = self.recurrent_kernel.transpose(1, 0, 2).reshape(size, gates * size)
        return CellWeights(kernel, self.recurrent_bias if self.kind == "gru" else None)


def cell_step(kind: str, weights: CellWeights, state: jax.Array,
              projected: jax.Array) -> Tuple[jax.Array, jax.Array]:
    """One step of a cell: `state [N, S]` (GRU: h; LSTM: c then h) and the input's projection
    `[N, G*H]` -> (new state `[N, S]`, output h `[N, H]`). A pure function of arrays, so that
    it can run inside `lax.scan`."""
    size = weights.recurrent_kernel.shape[0]
    if kind == "gru":  # gates r, z, candidate n (as flax's and PyTorch's GRU)
        recurrent = state @ weights.recurrent_kernel
        reset = jax.nn.sigmoid(projected[:, :size] + recurrent[:, :size])
        update = jax.nn.sigmoid(projected[:, size:2 * size] + recurrent[:, size:2 * size])
        candidate = jnp.tanh(projected[:, 2 * size:]
                             + reset * (recurrent[:, 2 * size:] + weights.recurrent_bias))
        h = (1.0 - update) * candidate + update * state
        return h, h
    c, h = state[:, :size], state[:, size:]
    gates = projected + h @ weights.recurrent_kernel  # i, f, g, o
    c = (jax.nn.sigmoid(gates[:, size:2 * size]) * c
         + jax.nn.sigmoid(gates[:, :size]) * jnp.tanh(gates[:, 2 * size:3 * size]))
    h = jax.nn.sigmoid(gates[:, 3 * size:]) * jnp.tanh(c)
    return jnp.concatenate([c, h], axis=1), h


class RecurrentActorCritic(ActorCriticBase):
    """The actor-critic with a cell (`cell`: gru | lstm, `rnn_size` units) between the torso
    and the heads: torso (MLP, CNN or serialized, as `ActorCritic`'s), cell, then the linear
    policy and value heads. `shared=False`: the value has a torso and a cell of its own.
    Initialized as `ActorCritic` is (see `Cell` for the cells).

    `__call__(carry [B, C], obs [B, *obs_shape], first [B]) -> (carry, policy output, value
    [B])`: one step. `unroll(carry [B, C], obs [T, B, ...], first [T, B])`: `T` steps, each as
    `__call__` computes it (what the learner replays). `value(carry, obs, first)`: the critic
    of one step alone.
    """

    cell: str = "gru"
    rnn_size: int = 128

    @property
    def num_cells(self) -> int:
        return 1 if self.shared else 2

    @property
    def state_size(self) -> int:
        return _STATES[self.cell] * self.rnn_size

    @property
    def carry_size(self) -> int:
        return self.num_cells * self.state_size

    def initial_carry(self, batch: Tuple[int, ...]) -> jax.Array:
        """The carry at an episode's start: zeros `[*batch, carry_size]`."""
        return jnp.zeros((*batch, self.carry_size), jnp.float32)

    def setup(self):
        self.torsos = [self._torso() for _ in range(self.num_cells)]
        self.cells = [Cell(self.cell, self.rnn_size) for _ in range(self.num_cells)]
        self.policy_head = _dense(self.num_outputs, 0.01)
        self.value_head = _dense(1, 1.0)
        if self.gaussian:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))

    def _recur(self, carry, obs, first, policy: bool = True):
        """The cells over `obs [T, B, ...]` -> (carry `[B, C]`, the policy head's output
        `[T, B, num_outputs]` (None when not `policy`), the value `[T, B]`). Without `policy`,
        only the value's cell runs (all of them with a shared trunk) and the others keep their
        state. Each step runs the torsos and heads too, on that step's `B` observations: the
        computation of the rollout's steps, so that a replayed sequence gives the rollout's
        outputs bit for bit (a torso run on all `T x B` observations at once rounds
        differently)."""
        num_cells, size = self.num_cells, self.state_size
        cells = range(num_cells) if policy else (num_cells - 1,)

        def step(module, carry, inputs):
            obs, first = inputs
            carry = jnp.where(first[:, None], 0.0, carry)
            x = module._flat(obs, 1)
            states = [carry[:, i * size:(i + 1) * size] for i in range(num_cells)]
            outputs = {}
            for i in cells:
                states[i], outputs[i] = cell_step(module.cell, module.cells[i].weights(),
                                                  states[i],
                                                  module.cells[i].project(module.torsos[i](x)))
            head = module.policy_head(outputs[0]) if policy else None
            value = module.value_head(outputs[num_cells - 1])[:, 0]
            return jnp.concatenate(states, axis=1), (head, value)

        if first.shape[0] == 1:
            carry, outputs = step(self, carry, (obs[0], first[0]))
            return carry, *jax.tree.map(lambda x: x[None], outputs)
        # flax's scan: the params are the same at every step
        scan = nn.scan(step, variable_broadcast="params", split_rngs={"params": False})
        carry, outputs = scan(self, carry, (obs, first))
        return carry, *outputs

    def unroll(self, carry: jax.Array, obs: jax.Array, first: jax.Array):
        """`T` steps: (carry `[B, C]`, policy output `[T, B, ...]`, value `[T, B]`)."""
        carry, head, value = self._recur(carry, obs, first)
        return carry, self._policy_out(head, first.shape), value

    def __call__(self, carry: jax.Array, obs: jax.Array, first: jax.Array):
        carry, policy_out, value = self.unroll(carry, obs[None], first[None])
        return carry, jax.tree.map(lambda x: x[0], policy_out), value[0]

    def value(self, carry: jax.Array, obs: jax.Array, first: jax.Array) -> jax.Array:
        """V of one step's observations `[B, ...]` after `carry` -> `[B]` (the value cell
        alone: the policy's cell too with a shared trunk)."""
        return self._recur(carry, obs[None], first[None], policy=False)[2][0]
