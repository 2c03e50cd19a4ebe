"""Pure math and the pieces of the learner: GAE, the loss terms, hyperparameters and their
schedules, PRNG streams, packing, the collectives over the devices axis."""
