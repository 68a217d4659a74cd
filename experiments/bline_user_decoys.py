"""Can decoys on the user hosts keep B_line from its first foothold? A sleeping defender that
places one decoy (each kind, on each of User1-4) at step 0 — before B_line scans its chosen user
host at step 1 — against B_lineAgent on the simulator (300 episodes each). Prints the mean
return and the steps per episode a user host is privileged, best placements first.

    .venv/bin/python experiments/bline_user_decoys.py
"""

from bline_foothold import USERS, run

DECOY_BASE = {"Apache": 28, "Femitter": 41, "HarakaSMPT": 54, "Smss": 67, "SSHD": 80,
              "Svchost": 93, "Tomcat": 106, "Vsftpd": 119}


def first_then_sleep(action):
    return lambda t, obs, ra, state: action if t == 0 else 0


def main():
    mean, se, priv = run(first_then_sleep(0))
    print(f"{'sleeping defender':28s} return {mean:9.2f} ± {se:.2f}   user host privileged "
          f"{priv:5.2f} steps/episode")
    rows = []
    for h in USERS:
        for kind, base in DECOY_BASE.items():
            rows.append((*run(first_then_sleep(base + h)), f"{kind} on User{h - 8} at step 0"))
    for mean, se, priv, name in sorted(rows, key=lambda r: r[2])[:8]:
        print(f"{name:28s} return {mean:9.2f} ± {se:.2f}   user host privileged {priv:5.2f} "
              "steps/episode")


if __name__ == "__main__":
    main()
