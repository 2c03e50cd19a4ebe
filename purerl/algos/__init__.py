"""Algorithms: the protocol, PPO, the learner, the rollout, evaluation; pure functions of arrays."""
