"""Known-answer vectors for the random numbers every env and actor draws (csrc/wfrl_rng.h) and its
Python twin (wfrl.rng): xoshiro256** seeded through splitmix64.

Two sources of truth, neither of them the code under test:
- published reference outputs: xoshiro256** started from the state {1, 2, 3, 4} (the vector the
  reference C code by Blackman and Vigna produces, used as the test vector of several ports), and
  splitmix64 started from 0;
- a few-line implementation written here from the algorithms' definitions (it reproduces both
  published vectors first), which gives the expected values of the seeded streams and of the two
  derived draws, uniform() and below(n).
The C header is checked through a small driver compiled here with gcc."""
import subprocess
from pathlib import Path

import pytest

from wfrl.rng import Xoshiro256, splitmix64

M64 = 2 ** 64 - 1

XOSHIRO_1234 = [11520, 0, 1509978240, 1215971899390074240, 1216172134540287360,
                607988272756665600, 16172922978634559625, 8476171486693032832,
                10595114339597558777, 2904607092377533576]
SPLITMIX_0 = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC]
SEEDS = (0, 1, 42, 2 ** 64 - 1)
N_OUT = 8
BELOW_N = (1, 2, 7, 145, 2 ** 32 - 1)
ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------- independent definitions
def _ref_splitmix(state):
    """splitmix64: add the golden gamma, then the variant-13 finaliser; (new state, output)."""
    state = (state + 0x9E3779B97F4A7C15) % 2 ** 64
    z = state
    for shift, mul in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        z = ((z ^ (z >> shift)) * mul) % 2 ** 64
    return state, z ^ (z >> 31)


def _ref_rotl(x, k):
    return ((x << k) % 2 ** 64) | (x >> (64 - k))


def _ref_xoshiro(state, n):
    """n outputs of xoshiro256** from the 4-word state (the definition: ** scrambler on s1)."""
    s0, s1, s2, s3 = state
    out = []
    for _ in range(n):
        out.append((_ref_rotl((s1 * 5) % 2 ** 64, 7) * 9) % 2 ** 64)
        t = (s1 << 17) % 2 ** 64
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = _ref_rotl(s3, 45)
    return out


def _ref_seeded_state(seed):
    state, words = seed, []
    for _ in range(4):
        state, w = _ref_splitmix(state)
        words.append(w)
    return words


def _expected(seed):
    """What the generator seeded with `seed` must give: N_OUT raw outputs, then one uniform
    (the top 53 bits over 2^53), then below(n) for each n in BELOW_N (the top 32 bits times n,
    shifted down by 32), each from the next output in turn."""
    raw = _ref_xoshiro(_ref_seeded_state(seed), N_OUT + 1 + len(BELOW_N))
    return (raw[:N_OUT], (raw[N_OUT] >> 11) / 2 ** 53,
            [((x >> 32) * n) >> 32 for x, n in zip(raw[N_OUT + 1:], BELOW_N)])


def test_the_independent_definition_reproduces_the_published_vectors():
    assert _ref_xoshiro([1, 2, 3, 4], 10) == XOSHIRO_1234
    state, outs = 0, []
    for _ in range(4):
        state, w = _ref_splitmix(state)
        outs.append(w)
    assert outs == SPLITMIX_0


# ------------------------------------------------------------------------ the Python twin
def test_python_splitmix64_gives_the_published_vector():
    state, outs = 0, []
    for _ in range(4):
        state, w = splitmix64(state)
        outs.append(w)
    assert outs == SPLITMIX_0


def test_python_xoshiro_gives_the_published_vector_and_is_seeded_by_splitmix():
    g = Xoshiro256(0)
    assert g.s == SPLITMIX_0            # seeding = the first four splitmix64 outputs of the seed
    g.s = [1, 2, 3, 4]
    assert [g.next() for _ in range(10)] == XOSHIRO_1234


@pytest.mark.parametrize("seed", SEEDS)
def test_python_xoshiro_seeded_streams(seed):
    raw, uni, below = _expected(seed)
    g = Xoshiro256(seed)
    assert [g.next() for _ in range(N_OUT)] == raw
    assert g.uniform() == uni
    assert [g.below(n) for n in BELOW_N] == below


# ------------------------------------------------------------------------------ the C header
_DRIVER = r"""
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include "wfrl_rng.h"

int main(int argc, char **argv)
{
    wfrl_rng r = {{1, 2, 3, 4}};
    for (int i = 0; i < 10; ++i) printf("%" PRIu64 " ", wfrl_rng_next(&r));
    printf("\n");
    uint64_t x = 0;
    for (int i = 0; i < 4; ++i) printf("%" PRIu64 " ", wfrl_splitmix64(&x));
    printf("\n");
    for (int a = 1; a < argc; ++a) {
        wfrl_rng_seed(&r, strtoull(argv[a], NULL, 10));
        for (int i = 0; i < %(n_out)d; ++i) printf("%" PRIu64 " ", wfrl_rng_next(&r));
        printf("%%.17g ", wfrl_rng_uniform(&r));
        const uint32_t ns[] = {%(below)s};
        for (unsigned i = 0; i < sizeof ns / sizeof ns[0]; ++i)
            printf("%" PRIu32 " ", wfrl_rng_below(&r, ns[i]));
        printf("\n");
    }
    return 0;
}
"""


def test_c_generator_gives_the_published_vectors_and_the_seeded_streams(tmp_path):
    src = tmp_path / "rng_vectors.c"
    src.write_text(_DRIVER.replace("%(n_out)d", str(N_OUT)).replace(
        "%(below)s", ", ".join(f"{n}u" for n in BELOW_N)).replace("%%", "%"))
    exe = tmp_path / "rng_vectors"
    build = subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I",
                            str(ROOT / "csrc"), str(src), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    res = subprocess.run([str(exe), *map(str, SEEDS)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert [int(v) for v in lines[0].split()] == XOSHIRO_1234
    assert [int(v) for v in lines[1].split()] == SPLITMIX_0
    assert len(lines) == 2 + len(SEEDS)
    for seed, line in zip(SEEDS, lines[2:]):
        raw, uni, below = _expected(seed)
        f = line.split()
        assert [int(v) for v in f[:N_OUT]] == raw, seed
        assert float(f[N_OUT]) == uni, seed
        assert [int(v) for v in f[N_OUT + 1:]] == below, seed
