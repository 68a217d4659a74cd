"""Build the compiled core of wfrl.

Only the extension list and the global Cython directives live here; metadata is in pyproject.toml.
Set WFRL_CYTHON_DEBUG=1 to build with bounds/wraparound checks and C asserts enabled.
"""
import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("WFRL_CYTHON_DEBUG", "0") == "1"

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    "embedsignature": True,
}

# Portable optimisation only: wheels go to other machines, so no -march=native; the hot loops
# carry AVX2/AVX-512 clones chosen at load time instead (WFRL_SIMD_CLONES, csrc/wfrl_types.h).
# -ffp-contract=off: no clone fuses a multiply-add that another rounds twice (same bits on every
# CPU); -fno-trapping-math: float selects may be if-converted, so those loops vectorise (no
# result changes in the default floating-point environment); -fno-math-errno: sqrtf is the
# instruction, not a call that may set errno (nothing reads errno), so Adam's loop vectorises.
# -fno-gcse, -fno-gcse-after-reload: GCC's two global common-subexpression passes took half the
# compile (on the unrolled GEMM blocks of wfrl_update.h) for no measured speed; without them the
# module compiles in half the time and computes the same bits (docs/install.md, "Build time").
compile_args = (["-O0", "-g"] if DEBUG else ["-O3", "-fno-gcse", "-fno-gcse-after-reload"]) + \
    ["-fopenmp-simd", "-ffp-contract=off", "-fno-trapping-math", "-fno-math-errno"]
macros = [] if DEBUG else [("NDEBUG", "1")]

extensions = [
    Extension(
        "wfrl._core",
        sources=["csrc/_core.pyx"],
        include_dirs=["csrc"],
        # the C headers, the per-subject binding files _core.pyx includes and the .pxd it
        # cimports: a change to any of them rebuilds the module
        depends=sorted(glob.glob("csrc/*.h") + glob.glob("csrc/*.pxi") + glob.glob("csrc/*.pxd")),
        extra_compile_args=compile_args,
        define_macros=macros,
    ),
]

# include_path: where _core.pyx finds wfrl_c.pxd (its includes are found beside it)
setup(ext_modules=cythonize(extensions, compiler_directives=directives,
                            include_path=["csrc"]))
