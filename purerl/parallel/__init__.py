"""The program: an algorithm mapped over members (`vmap`) and devices (`shard_map`), PBT's
generation step, processes and platforms."""
