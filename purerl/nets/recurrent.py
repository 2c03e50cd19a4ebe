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

from purerl.nets.layers import MLP, ActorCriticBase, dense, orthogonal

_GATES = {"gru": 3, "lstm": 4}  # gate blocks of the input and recurrent kernels
_STATES = {"gru": 1, "lstm": 2}  # [H]-sized states per cell: h; c and h


def _forget_bias_one(size: int):
    """LSTM biases `[K, 1, 4H]`, gates (i, f, g, o): zero but for the forget gate's ones (so
    that a fresh cell keeps its state; Jozefowicz et al. 2015)."""

    def init(key, shape, dtype=jnp.float32):
        return jnp.zeros(shape, dtype).at[..., size:2 * size].set(1.0)

    return init


class CellWeights(NamedTuple):
    """What one recurrent step of `K` cells reads: the recurrent kernels `[K, H, G*H]` and, for
    a GRU, the biases of its candidate's recurrent part `[K, 1, H]`."""

    recurrent_kernel: jax.Array
    recurrent_bias: Any


class Cells(nn.Module):
    """`num_towers` separate GRU or LSTM layers of `size` units each, run as one batched layer
    (as `MLP(num_towers=...)` runs towers: one kernel call for all). A call gives each layer's
    input projection, `[K, N, D] -> [K, N, G*H]`, and the `CellWeights` of its recurrence that
    `cell_step` reads; `towers` (a slice) picks some of the layers. Kernels orthogonal (gain 1;
    the recurrent one per gate block), biases zero (an LSTM's forget gate one)."""

    kind: str  # gru | lstm
    size: int
    num_towers: int = 1

    @nn.compact
    def __call__(self, features: jax.Array, towers: slice = slice(None)):
        """`(projected [K', N, G*H], CellWeights)` of the `towers` (K' of them) for their
        `features [K', N, D]`.

        Args:
            features: `[K', N, D]`, the towers' torso features.
            towers: the cells to run, a slice of the `num_towers`.

        Returns:
            `(projected, CellWeights)`: `G` is 3 for a GRU, 4 for an LSTM, `H` = `size`.
        """
        gates, size, num = _GATES[self.kind], self.size, self.num_towers
        kernel = self.param("input_kernel", orthogonal(1.0, batch_ndim=1),
                            (num, features.shape[-1], gates * size))
        bias = self.param("input_bias", (_forget_bias_one(size) if self.kind == "lstm"
                                         else nn.initializers.zeros), (num, 1, gates * size))
        recurrent = self.param("recurrent_kernel", orthogonal(1.0, batch_ndim=2),
                               (num, gates, size, size))
        recurrent_bias = (self.param("recurrent_bias", nn.initializers.zeros, (num, 1, size))
                          if self.kind == "gru" else None)
        projected = jnp.einsum("knd,kdg->kng", features, kernel[towers]) + bias[towers]
        recurrent = recurrent[towers].transpose(0, 2, 1, 3).reshape(-1, size, gates * size)
        return projected, CellWeights(recurrent, None if recurrent_bias is None
                                      else recurrent_bias[towers])


def cell_step(kind: str, weights: CellWeights, state: jax.Array,
              projected: jax.Array) -> Tuple[jax.Array, jax.Array]:
    """One step of `K` cells: `state [K, N, S]` (GRU: h; LSTM: c then h) and the inputs'
    projections `[K, N, G*H]` -> (new state `[K, N, S]`, output h `[K, N, H]`). A pure function
    of arrays.

    Args:
        kind: "gru" or "lstm".
        weights: the cells' recurrence (`Cells`'s), `recurrent_kernel` `[K, H, G*H]`.
        state: `[K, N, S]`, S = H (GRU) or 2H (LSTM).
        projected: the inputs' projections `[K, N, G*H]`.

    Returns:
        `(state [K, N, S], h [K, N, H])`.
    """
    size = weights.recurrent_kernel.shape[-2]
    if kind == "gru":  # gates r, z, candidate n (as flax's and PyTorch's GRU)
        recurrent = state @ weights.recurrent_kernel
        reset = jax.nn.sigmoid(projected[..., :size] + recurrent[..., :size])
        update = jax.nn.sigmoid(projected[..., size:2 * size] + recurrent[..., size:2 * size])
        candidate = jnp.tanh(projected[..., 2 * size:]
                             + reset * (recurrent[..., 2 * size:] + weights.recurrent_bias))
        h = (1.0 - update) * candidate + update * state
        return h, h
    c, h = state[..., :size], state[..., size:]
    gates = projected + h @ weights.recurrent_kernel  # i, f, g, o
    c = (jax.nn.sigmoid(gates[..., size:2 * size]) * c
         + jax.nn.sigmoid(gates[..., :size]) * jnp.tanh(gates[..., 2 * size:3 * size]))
    h = jax.nn.sigmoid(gates[..., 3 * size:]) * jnp.tanh(c)
    return jnp.concatenate([c, h], axis=-1), h


def scan_steps(step, module: nn.Module, carry, inputs):
    """`step(module, carry, inputs_t) -> (carry, outputs_t)` over the leading axis `T` of
    `inputs`, with the module's params the same at every step (flax's `nn.scan`); one step is
    called directly.

    Args:
        step: one step of `module`.
        module: the module whose params the steps read.
        carry: the carry before the first step.
        inputs: a tree of `[T, ...]` arrays.

    Returns:
        `(carry after the last step, outputs stacked [T, ...])`.
    """
    if jax.tree.leaves(inputs)[0].shape[0] == 1:
        carry, outputs = step(module, carry, jax.tree.map(lambda x: x[0], inputs))
        return carry, jax.tree.map(lambda x: x[None], outputs)
    scan = nn.scan(step, variable_broadcast="params", split_rngs={"params": False})
    return scan(module, carry, inputs)


class StepOfUnroll:
    """What a recurrent actor-critic derives from its `unroll` and `carry_size`: the carry at
    an episode's start and one step (`RecurrentActorCritic`,
    `networks.UserRecurrentActorCritic`)."""

    def initial_carry(self, batch: Tuple[int, ...]) -> jax.Array:
        """The carry at an episode's start.

        Args:
            batch: the leading shape, e.g. `(B,)`.

        Returns:
            float32 zeros `[*batch, carry_size]`.
        """
        return jnp.zeros((*batch, self.carry_size), jnp.float32)

    def __call__(self, carry: jax.Array, obs: jax.Array, first: jax.Array):
        """One step: `unroll` of one.

        Args:
            carry: `[B, C]`.
            obs: `[B, *obs_shape]`.
            first: bool `[B]`.

        Returns:
            `(carry [B, C], policy_out [B, num_outputs], value [B])`.
        """
        carry, policy_out, value = self.unroll(carry, obs[None], first[None])
        return carry, jax.tree.map(lambda x: x[0], policy_out), value[0]


class RecurrentActorCritic(StepOfUnroll, ActorCriticBase):
    """The actor-critic with a cell (`cell`: gru | lstm, `rnn_size` units) between the torso
    and the heads: torso (MLP, CNN or serialized, as `ActorCritic`'s), cell, then the linear
    policy and value heads. `shared=False`: the value has a torso and a cell of its own.
    Initialized as `ActorCritic` is (see `Cells` for the cells).

    `__call__(carry [B, C], obs [B, *obs_shape], first [B]) -> (carry, policy output, value
    [B])`: one step. `unroll(carry [B, C], obs [T, B, ...], first [T, B])`: `T` steps, each as
    `__call__` computes it (what the learner replays). `value(carry, obs, first)`: the critic
    of one step alone.
    """

    cell: str = "gru"
    rnn_size: int = 128

    @property
    def num_cells(self) -> int:
        """1 with a shared trunk, else 2 (the value's cell of its own)."""
        return 1 if self.shared else 2

    @property
    def state_size(self) -> int:
        """One cell's state `S`: `rnn_size` (GRU), twice it (LSTM: c and h)."""
        return _STATES[self.cell] * self.rnn_size

    @property
    def carry_size(self) -> int:
        """The carry's width `C`: `num_cells * state_size`."""
        return self.num_cells * self.state_size

    @property
    def _batched_torso(self) -> bool:
        """Separate policy and value MLPs over the same raw inputs run as one two-tower MLP."""
        return not (self.shared or self.conv_channels or self.vocab_size or self.value_inputs)

    def setup(self):
        """flax's setup: the torsos, the cells and the heads."""
        if self._batched_torso:
            self.torsos = MLP(self.hidden_sizes, self.activation, num_towers=2)
        else:
            self.torsos = [self._torso() for _ in range(self.num_cells)]
        self.cells = Cells(self.cell, self.rnn_size, self.num_cells)
        self.policy_head = dense(self.num_outputs, 0.01)
        self.value_head = dense(1, 1.0)
        if self.gaussian:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.num_outputs,))

    def _features(self, x: jax.Array, towers: slice) -> jax.Array:
        """The `towers`' torso features of `x [N, ...]`: `[K', N, F]`."""
        if self._batched_torso:
            if towers == slice(None):
                return self.torsos(x)
            return self.torsos(x, tower=towers.start)[None]
        tower_ids = range(self.num_cells)[towers]  # 0: the policy's, 1: the value's own
        return jnp.stack([self.torsos[i](self._tower_inputs(x, value=i == 1))
                          for i in tower_ids])

    def _recur(self, carry, obs, first, policy: bool = True):
        """The cells over `obs [T, B, ...]` -> (carry `[B, C]`, the policy head's output
        `[T, B, num_outputs]` (None when not `policy`), the value `[T, B]`). Without `policy`,
        only the value's cell runs (the one cell of a shared trunk) and the other keeps its
        state. Each step runs the torsos and heads too, on that step's `B` observations: the
        computation of the rollout's steps, so that a replayed sequence gives the rollout's
        outputs bit for bit (a torso run on all `T x B` observations at once rounds
        differently)."""
        num_cells, size = self.num_cells, self.state_size
        towers = slice(None) if policy else slice(num_cells - 1, num_cells)

        def step(module, carry, inputs):
            obs, first = inputs
            carry = jnp.where(first[:, None], 0.0, carry)
            states = carry.reshape(-1, num_cells, size).swapaxes(0, 1)  # [K, B, S]
            projected, weights = module.cells(module._features(module._flat(obs, 1), towers),
                                              towers)
            new_states, outputs = cell_step(module.cell, weights, states[towers], projected)
            # every cell ran with `policy`: their states replace the old ones whole (no scatter,
            # which ONNX converters mishandle at a symbolic batch size)
            states = new_states if policy else states.at[towers].set(new_states)
            head = module.policy_head(outputs[0]) if policy else None
            value = module.value_head(outputs[-1])[:, 0]
            return states.swapaxes(0, 1).reshape(carry.shape), (head, value)

        carry, outputs = scan_steps(step, self, carry, (obs, first))
        return carry, *outputs

    def unroll(self, carry: jax.Array, obs: jax.Array, first: jax.Array):
        """`T` steps: (carry `[B, C]`, policy output `[T, B, ...]`, value `[T, B]`).

        Args:
            carry: `[B, C]` before the first step.
            obs: the network's inputs `[T, B, *obs_shape]`.
            first: bool `[T, B]`: the step starts an episode (the carry is zeroed before it).

        Returns:
            `(carry [B, C], policy_out [T, B, num_outputs], value [T, B])`; a Gaussian's
                policy output is `(mean, log_std)`.
        """
        carry, head, value = self._recur(carry, obs, first)
        return carry, self._policy_out(head, first.shape), value

    def value(self, carry: jax.Array, obs: jax.Array, first: jax.Array) -> jax.Array:
        """V of one step's observations `[B, ...]` after `carry` -> `[B]` (the value cell
        alone: the policy's cell too with a shared trunk).

        Args:
            carry: `[B, C]`.
            obs: `[B, *obs_shape]`.
            first: bool `[B]`.

        Returns:
            float32 `[B]`.
        """
        return self._recur(carry, obs[None], first[None], policy=False)[2][0]
