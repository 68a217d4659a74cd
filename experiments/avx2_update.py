"""The learner's update as a CPU without AVX-512 runs it, emulated on one that has it
(docs/learner.md): the extension built for AVX2 alone (CFLAGS="-march=x86-64-v3
-DWFRL_NO_CLONES": no AVX-512 instruction in it), the compiled minibatch step forced on with its
portable tiling (the one such a CPU runs) against torch's steps, torch held to its AVX2 kernels
(ATEN_CPU_CAPABILITY=avx2); batch by batch in one run (wfrl.tools.benchmarks.bench_train's
update-only rates).

    CFLAGS="-march=x86-64-v3 -DWFRL_NO_CLONES" python setup.py build_ext --inplace   # in a copy
    PYTHONPATH=COPY ATEN_CPU_CAPABILITY=avx2 WFRL_COMPILED_STEP=on \
        python experiments/avx2_update.py --batches 24 --out F.json
"""
from __future__ import annotations

import argparse
import json
import os

from wfrl import _core
from wfrl.tools.benchmarks import bench_train


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", type=int, default=24)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    _core.set_gemm_level(0)
    import torch
    res = bench_train(batches=a.batches, e2e_episodes=200, repeats=1, collector="sequential")
    keep = {k: v for k, v in res.items() if k.startswith("update_") and k.endswith("_per_s")}
    keep.update(gemm_level=_core.gemm_level(), core=_core.__file__.rsplit("/", 1)[-1],
                torch_cpu_capability=torch.backends.cpu.get_cpu_capability(),
                compiled_step=os.environ.get("WFRL_COMPILED_STEP", "auto"),
                compiled_over_torch_steps=round(res["update_speedup_over_torch_steps"], 3))
    print(json.dumps(keep))
    with open(a.out, "w") as f:
        json.dump(keep, f, indent=1)


if __name__ == "__main__":
    main()
