"""CAGE2's blue action layout, in CybORG's order, and the actions' names: the one home of these
facts for every backend, wrapper, feature and report.

Action a in [0, 145): Sleep (0), Monitor (1), then per host h (observation order, HOSTS):
Analyse(h) = 2 + h, Remove(h) = 15 + h, the eight decoy kinds k in DECOY_KINDS order at
28 + 13k + h, Restore(h) = 132 + h. csrc/wfrl_types.h and csrc/wfrl_cage2.h hold the compiled
side of the same layout (tests/test_constants.py keeps them equal)."""
from __future__ import annotations

N_HOSTS = 13
HOSTS = ("Defender", "Enterprise0", "Enterprise1", "Enterprise2", "Op_Host0", "Op_Host1",
         "Op_Host2", "Op_Server0", "User0", "User1", "User2", "User3", "User4")

SLEEP = 0
MONITOR = 1
ANALYSE_FIRST = 2
REMOVE_FIRST = 15
DECOY_FIRST = 28          # DecoyApache(0); kind k on host h is action 28 + 13k + h
RESTORE_FIRST = 132
N_DECOYS = 8
DECOY_KINDS = ("Apache", "Femitter", "HarakaSMPT", "Smss", "SSHD", "Svchost", "Tomcat", "Vsftpd")
N_ACTIONS = RESTORE_FIRST + N_HOSTS   # 145

# CybORG's action names and the first action of each, in action order
_KINDS = (("Sleep", SLEEP), ("Monitor", MONITOR), ("Analyse", ANALYSE_FIRST),
          ("Remove", REMOVE_FIRST)) + tuple(
    (f"Decoy{kind}", DECOY_FIRST + N_HOSTS * k) for k, kind in enumerate(DECOY_KINDS)) + (
    ("Restore", RESTORE_FIRST),)


def action_name(a: int) -> str:
    """CybORG's name of blue action a (0-144), e.g. Restore Op_Server0."""
    if a < ANALYSE_FIRST:
        return _KINDS[a][0]
    name, base = next((k, b) for k, b in reversed(_KINDS) if a >= b)
    return f"{name} {HOSTS[a - base]}"
