/* Fixed sizes of the CAGE2 blue problem, shared by every compiled part of wfrl.
 * Plain C: no Python.h anywhere under csrc/ except the generated bindings. */
#ifndef WFRL_TYPES_H
#define WFRL_TYPES_H

#include <stdint.h>

#define WFRL_OBS_DIM 52      /* 13 hosts x [act0, act1, comp0, comp1] */
#define WFRL_N_ACTIONS 145   /* Sleep, Monitor, 13 x {Analyse, Remove, 8 decoys, Restore} */
#define WFRL_N_HOSTS 13
#define WFRL_EP_LEN 100      /* blue steps per episode */
#define WFRL_N_UNIT_TYPES 5
#define WFRL_COND_DIM 25     /* workflow one-hot, 5 positions x 5 unit types */
/* First action of each per-host block (action = first + host index). */
#define WFRL_ACT_ANALYSE 2
#define WFRL_ACT_REMOVE 15
#define WFRL_ACT_DECOY 28     /* 8 decoy kinds x 13 hosts: 28 + 13 * kind + host */
#define WFRL_ACT_RESTORE 132

/* WFRL_SIMD_CLONES before a hot function compiles it three times — for AVX-512 (x86-64-v4),
 * AVX2 (x86-64-v3) and the baseline — and picks the one the CPU supports when the module loads
 * (GCC function multiversioning): a wheel built once runs on any x86-64 and uses the wide
 * vectors where they exist. The project builds with -ffp-contract=off, so no clone fuses a
 * multiply and an add that another rounds separately: a loop vectorised across independent
 * outputs gives the same bits in every clone. Elsewhere (other compilers, other architectures,
 * or with WFRL_NO_CLONES defined) the function is compiled once. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(WFRL_NO_CLONES)
#define WFRL_SIMD_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), unused))
#elif defined(__GNUC__)
#define WFRL_SIMD_CLONES __attribute__((unused))
#else
#define WFRL_SIMD_CLONES
#endif

#if defined(__GNUC__)
#define WFRL_UNUSED __attribute__((unused))
#else
#define WFRL_UNUSED
#endif

#endif
