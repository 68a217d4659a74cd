"""wfrl: workflow-conditioned PPO for CAGE Challenge 2 blue agents.

Importing the package is cheap: torch, CybORG and the compiled core load only where they are used.
"""

__version__ = "0.1.0"


def load_agent(checkpoint: str, workflow: str | None = None):
    """A checkpoint (a file or pretrained:NAME) as a CAGE2 agent with get_action(observation,
    action_space) and end_episode(), played greedily: wfrl.agents.CheckpointAgent."""
    from wfrl.agents import load_agent as load
    return load(checkpoint, workflow)
