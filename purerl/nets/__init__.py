"""The agent: networks (purerl's and a user's), recurrent cells, layers, action distributions, and
the agent that acts with them in the wrapped envs."""
