"""One training run: the learner steps shared with the search (steps: collect, advantages, one
PPO update, the log row, pretraining, checkpoint payloads) and the single-workflow run loop
(run)."""
