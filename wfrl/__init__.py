"""wfrl: workflow-conditioned PPO for CAGE Challenge 2 blue agents.

Importing the package is cheap: torch, CybORG and the compiled core load only where they are used.
"""

__version__ = "0.1.0"
