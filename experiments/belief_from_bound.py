"""A belief network started from the full-information bound's weights: the bound reads the truth
block (red's access per host, one-hot), the belief block has the same 39 floats as shares over
the particles plus 3 red-kind shares, so the bound's first-layer columns of the truth block
become those of the belief block's first 39 floats (the kind columns start at zero) and every
other weight is copied. Where the belief is certain the new network acts exactly as the bound
does; `wfrl train --init-from OUT --belief-input N` then trains it with the belief.

    python experiments/belief_from_bound.py BOUND.pt OUT.pt [--particles 32]
"""
import argparse

import torch

from wfrl.errors import UserError
from wfrl.features import BELIEF_DIM, MEM_DIM, TRUTH_DIM
from wfrl.ppo.netspec import NetSpec
from wfrl.runlog import load_checkpoint

OBS_DIM = 52


def transplant(ck: dict, particles: int) -> dict:
    net = ck.get("net", {})
    if not net.get("truth_input") or net.get("belief"):
        raise UserError("the source must be a network with the truth input and no belief")
    lo = OBS_DIM + (MEM_DIM if net.get("memory") else 0)
    new_net = NetSpec(int(net["hidden"]), bool(net.get("memory")), bool(net.get("mask")), False,
                      particles, 7)
    model = {}
    for k, v in ck["model"].items():
        if k in ("actor.0.weight", "critic.0.weight"):
            h = v.shape[0]
            w = torch.zeros(h, new_net.in_dim, dtype=v.dtype)
            w[:, :lo] = v[:, :lo]                                   # observation, memory
            w[:, lo:lo + TRUTH_DIM] = v[:, lo:lo + TRUTH_DIM]       # truth -> belief shares
            w[:, lo + BELIEF_DIM:] = v[:, lo + TRUTH_DIM:]          # workflow one-hot
            model[k] = w
        else:
            model[k] = v.clone()
    out = {k: v for k, v in ck.items() if k not in ("optimizer", "selection")}
    out["model"] = model
    out["net"] = new_net.to_dict()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bound")
    ap.add_argument("out")
    ap.add_argument("--particles", type=int, default=32)
    a = ap.parse_args(argv)
    torch.save(transplant(load_checkpoint(a.bound), a.particles), a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
