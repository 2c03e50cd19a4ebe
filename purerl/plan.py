"""The execution plan: which of purerl's faster paths the programs take, decided once by the
`plan` setting (auto: by their platform, `execution_plan`) and passed down to the parts that
have one.

Each faster path computes what its plain twin computes (a test compares each pair); each was
measured to pay on XLA:CPU, where small kernels and random-number loops dominate. On other
platforms the plain path runs: it is the code a reader meets first, and `plan=plain` runs it on
a CPU too. No plan changes what a run saves: a checkpoint holds the same state whichever ran.

The last five fields lay the plain program out as PureJaxRL's `ppo.py` lays its own out, one
difference each, so that one accelerator run can time which of them (if any) costs purerl
speed there (`benchmarks/peers.py --plans`); no named plan sets them.
"""

from __future__ import annotations

from typing import NamedTuple, Optional


class ExecutionPlan(NamedTuple):
    """The faster paths to take; the defaults are the plain paths."""

    # `layers.init_params`: every orthogonal kernel from one normal draw (flax's `init` draws
    # each from a key of its own)
    one_draw_init: bool = False
    # `layers.Conv`: convolutions as matmuls over image patches (`lax.conv_general_dilated`)
    conv_patch_matmul: bool = False
    # `rollout`: up to this many auto-resets (steps x envs) drawn ahead of the scan; 0: each
    # step draws its own
    resets_ahead: int = 0
    # `learner`: all epochs' minibatches gathered before the steps while they weigh at most
    # this many bytes; 0: each step gathers its own
    gather_ahead_bytes: int = 0
    # `learner`: the default optimizer's steps on the parameters and optimizer state raveled
    # into one vector each (`learner.ravel_like_params`), within an update
    flat_optimizer: bool = False
    # `prng.permutations_from_bits`: one sort of packed uint32 for permutations of up to
    # 2^this many indices; larger ones as `index_shuffle` says
    packed_sort_bits: int = 0
    # `prng.permutations_from_bits`: permutations beyond `packed_sort_bits` as a keyed
    # bijection of the indices (`prng.feistel_permutation`, no sort); False:
    # `jax.random.permutation` of a key per row. The CPU plan keeps the packed sort up to
    # 2^20, where the Feistel network is faster too, so that runs of those sizes draw the
    # minibatches they drew before it
    index_shuffle: bool = False
    # `learner`: each epoch draws its permutation at its start, inside a loop over epochs
    # (PureJaxRL); False: all epochs' at once, before the steps. The same permutations but
    # for `jax.random.permutation` of rbg keys, which JAX does not draw alike alone and vmapped
    permutation_per_epoch: bool = False
    # `learner`: each epoch gathers the whole batch in its order once and steps over slices of
    # it (PureJaxRL's `jnp.take` of the batch); False: each step gathers its minibatch (or all
    # ahead, `gather_ahead_bytes`)
    gather_per_epoch: bool = False
    # `rollout`: separate towers' value computed by each step with the policy (PureJaxRL);
    # False: the value tower runs once over all observations after the scan
    value_in_step: bool = False
    # `rollout`: each step computes the value of its true next observation; False: a step's
    # is the following step's value, and a loop after the scan computes the rest (episodes
    # truncated and every env's last step)
    next_value_in_step: bool = False
    # `layers.MLP`: two towers run as two MLPs, a matmul per tower and layer (PureJaxRL's two
    # Dense stacks); False: one batched matmul per layer
    towers_apart: bool = False


PLAIN = ExecutionPlan()
CPU = ExecutionPlan(one_draw_init=True, conv_patch_matmul=True, resets_ahead=1 << 16,
                    gather_ahead_bytes=1 << 27, flat_optimizer=True, packed_sort_bits=20,
                    index_shuffle=True)


PLANS = {"plain": PLAIN, "cpu": CPU}
PLAN_SETTINGS = ("auto", *PLANS)  # the `plan` setting's values


def execution_plan(platform: Optional[str] = None, setting: str = "auto") -> ExecutionPlan:
    """The plan that the `plan` setting names: `setting` "plain" or "cpu", or "auto": the plan
    for `platform` ("cpu", "gpu", "tpu"; default: JAX's default backend's).

    Args:
        platform: "cpu", "gpu" or "tpu"; None: JAX's default backend.
        setting: the `plan` setting: "auto", "plain" or "cpu".

    Returns:
        The `ExecutionPlan`: `CPU` for "cpu" (or auto on CPU), else `PLAIN`.
    """
    if setting != "auto":
        return PLANS[setting]
    if platform is None:
        # JAX (0.5 s): validation imports this module before JAX, which is asked only here
        import jax

        platform = jax.default_backend()
    return CPU if platform == "cpu" else PLAIN


def plan_name(plan: ExecutionPlan) -> str:
    """The name of `plan` as summary.json and a checkpoint's record give it: "plain", "cpu", or
    "custom" for a plan given from Python with other paths.

    Args:
        plan: the execution plan.

    Returns:
        The name.
    """
    return next((name for name, known in PLANS.items() if known == plan), "custom")
