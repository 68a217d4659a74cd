"""Where a workflow search's visits start (`--base`): a base pretrained by the search itself
(the default), an order-conditioned policy trained before, or, with `auto`, the one shipped for
the backend's CybORG code when the search's settings are the ones it was trained with."""
from __future__ import annotations

from wfrl.config.run import SearchConfig
from wfrl.errors import UserError

# The search's base on the leaderboard's CybORG code: the ground truth's conditioned policies
# there were still improving at 60,000 episodes (residual run sd 0.85 against 0.31 at 120,000),
# so the search trains its base as long, and keeps its 15,000 episodes of visits.
LEADERBOARD_SEARCH_PRETRAIN = 120_000


# The order-conditioned policy shipped for each CybORG code, where `--base auto` starts from.
SHIPPED_BASE = {False: "pretrained:any_workflow", True: "pretrained:any_workflow_leaderboard"}
VISIT_BUDGET = 30_000   # the default budget of a search that starts from a shipped base


def base_mismatch(cfg: SearchConfig, ck: dict) -> str | None:
    """Why a conditioned policy cannot be this search's base (None: it can): it must have been
    trained on the same CybORG code, with the same λ, foothold rule and input blocks."""
    from wfrl.evaluation.checkpoint import net_from_checkpoint, trained_on_other_code
    theirs = ck.get("config", {}) if isinstance(ck.get("config"), dict) else {}
    if not ck.get("any_workflow") and "base" not in ck:
        return "it is not an order-conditioned policy (it follows one workflow)"
    other = trained_on_other_code(ck, cfg.backend)
    if other is not None:
        return f"it was trained on {other}'s code, this search plays {cfg.backend}"
    lam = float(theirs.get("alignment_lambda", 30.0))
    if lam != cfg.alignment_lambda:
        return f"it was trained with λ = {lam:g}, this search uses {cfg.alignment_lambda:g}"
    if bool(theirs.get("count_foothold", False)) != cfg.count_foothold:
        return "its foothold rule (--count-foothold) differs"
    net, ours = net_from_checkpoint(ck), cfg.ppo.net()
    if net != ours:
        return f"its policy is {net.describe()}, this search trains {ours.describe()}"
    return None


def checked_base(cfg: SearchConfig, source: str) -> dict:
    """The conditioned policy `source` as a checkpoint, or a one-line UserError when it cannot
    be this search's base (base_mismatch)."""
    from wfrl.runlog import load_checkpoint
    ck = load_checkpoint(source)
    why = base_mismatch(cfg, ck)
    if why is not None:
        raise UserError(f"--base {source} cannot start this search: {why}")
    return ck


def search_defaults(backend: str, given: dict, cfg: SearchConfig | None = None) -> tuple:
    """The search settings that depend on --backend and --base, for those not given, and a line
    saying where the visits start: `--base auto` takes the conditioned policy shipped for the
    backend's code when its settings match (no pretraining, VISIT_BUDGET episodes of visits);
    otherwise, and with `--base pretrain`, a base pretrained here (on the leaderboard's code of
    120,000 episodes, the budget 60,000 larger than the default). Returns (fill, note)."""
    from wfrl.envs.base import is_leaderboard
    from wfrl.runlog import load_checkpoint
    cfg = cfg or SearchConfig(backend=backend)
    base, note = cfg.base, None
    if base == "auto":
        shipped = SHIPPED_BASE[is_leaderboard(backend)]
        why = ("--pretrain-episodes is given" if "pretrain_episodes" in given else
               f"--inherit {cfg.inherit} uses no base" if cfg.inherit == "scratch" else
               base_mismatch(cfg, load_checkpoint(shipped)))
        if why is None:
            fill = {"base": shipped, "pretrain_episodes": 0}
            if "total_episodes" not in given:
                fill["total_episodes"] = VISIT_BUDGET
            return fill, (f"[base] the visits start from {shipped} (trained with these "
                          "settings); no pretraining")
        base, note = "pretrain", (f"[base] pretraining a base here, not starting from {shipped}: "
                                  f"{why}")
    if base != "pretrain":   # a checkpoint the user named
        checked_base(cfg, base)
        fill = {"pretrain_episodes": 0}
        return fill, f"[base] the visits start from {base}; no pretraining"
    fill = {"base": "pretrain"}
    if is_leaderboard(backend) and "pretrain_episodes" not in given:
        fill["pretrain_episodes"] = LEADERBOARD_SEARCH_PRETRAIN
        if "total_episodes" not in given:
            default = SearchConfig()
            fill["total_episodes"] = (default.total_episodes + LEADERBOARD_SEARCH_PRETRAIN
                                      - default.pretrain_episodes)
    return fill, note
