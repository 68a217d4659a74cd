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

#endif
