"""PPO: the torch actor-critic, its numpy twin for rollouts, GAE, and the learner."""
