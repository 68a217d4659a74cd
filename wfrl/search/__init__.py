"""Workflow search: a Gaussian process over permutations, UCB, the compliance-gated loop."""
