"""Scoring policies and agents: returns of a checkpoint (returns), the CAGE2 protocol (cage2, with
the screen of candidate checkpoints), any Python agent (agents), where the cost comes from
(attribution), a checkpoint's policy (checkpoint), decision-time search (planner) and episode
pages (replay)."""
