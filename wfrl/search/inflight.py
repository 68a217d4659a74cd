"""Steps 2-4 of the workflow search with K visits in flight (--concurrent-visits K > 1): ask a
visit while others train, hand it to a pool (wfrl.search.concurrent), tell the optimizer the
visits in visit order. A part of wfrl.search.loop.WorkflowSearch (its mixin): the methods use
the search's state, run directory, optimizer and commit."""
from __future__ import annotations

from typing import TYPE_CHECKING

from wfrl.runlog import BASE_POLICY, atomic_write_bytes, checkpoint_path, load_checkpoint, save_checkpoint
from wfrl.search.report import describe_pick
from wfrl.search.state import Pending, Visit, as_plain, visit_from_json
from wfrl.training.steps import state_payload
from wfrl.workflow import Workflow

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from wfrl.config.run import SearchConfig
    from wfrl.search.state import Pick, SearchState, StateWriter


def visit_source(parent, wf_index: int) -> str:
    """Where a visit of wf_index starts, in words (parent as WorkflowSearch._parent_for)."""
    return ("its own policy" if parent == wf_index else
            "the pretrained base" if parent == BASE_POLICY else
            f"{Workflow.from_index(parent)}" if parent is not None else "scratch")



class VisitsInFlight:
    """WorkflowSearch's steps with K visits in flight."""

    if TYPE_CHECKING:   # what it uses of WorkflowSearch
        cfg: SearchConfig
        state: SearchState
        run: Path
        progress: Callable[[str], None]
        _writer: StateWriter

        def _ask(self, pending=()) -> Pick: ...

        def _parent_for(self, wf_index: int) -> int | None: ...

        def _lineage(self, parent) -> int: ...

        def _commit(self, learner) -> None: ...

        def _log_update(self, row: dict, ustats: dict) -> None: ...

        def _tell_visit(self, visit, complete: bool, played: int) -> None: ...

        def _rate(self) -> float: ...

        def _eta(self) -> str: ...

    def _run_concurrent(self) -> None:
        """--concurrent-visits K: visit i is asked once visit i − K is told (the visits in flight
        pending at the ask), trained by a pool (wfrl.search.concurrent) and told in visit order;
        each commit holds the visits in flight, which a resumed run trains again."""
        from wfrl.search.concurrent import make_visit_pool
        from wfrl.search.visits import visit_collector_name
        cfg, state = self.cfg, self.state
        state.episode_mark = max(state.episode_mark, state.episodes_used)
        self._visit_collector = visit_collector_name(cfg, cfg.concurrent_visits)
        self._pool = make_visit_pool(cfg, self._visit_collector)
        for p in state.pending:          # in flight at the last commit: trained again
            self._pool.submit(p.visit.iteration, (self._job(p),))
        while True:
            while len(state.pending) < cfg.concurrent_visits and self._can_ask():
                p = self._ask_pending()
                self._pool.submit(p.visit.iteration, (self._job(p),))
            if not state.pending:
                break
            p = state.pending[0]
            self._tell_pending(p, self._pool.result(p.visit.iteration))

    def _reservation(self) -> tuple[int, int]:
        """(first episode number, episodes of the budget) a visit asked now gets: numbers past
        every told visit's and every reservation in flight, and what the budget has left after
        the visits told and the reservations in flight, at most --max-episodes."""
        cfg, state = self.cfg, self.state
        first = max([state.episode_mark] + [p.first_episode + p.budget for p in state.pending])
        budget = min(cfg.max_episodes, cfg.total_episodes - state.episodes_used
                     - sum(p.budget for p in state.pending))
        return first, budget

    def _can_ask(self) -> bool:
        cfg, state = self.cfg, self.state
        if cfg.max_evaluations and state.iteration >= cfg.max_evaluations:
            return False
        return self._reservation()[1] > 0

    def _ask_pending(self) -> Pending:
        """Ask for the next visit with the visits in flight pending; commit it in flight."""
        state = self.state
        pick = self._ask(pending=[p.visit.workflow for p in state.pending])
        parent = self._parent_for(pick.workflow)
        start = None
        if parent == BASE_POLICY:
            start = checkpoint_path(self.run, BASE_POLICY).name    # never changes
        elif parent is not None:
            # the parent's policy as it is now: a visit told before this one is may replace it
            start = f"start_{state.iteration}.pt"
            atomic_write_bytes(self.run / "checkpoints" / start,
                               checkpoint_path(self.run, parent).read_bytes())
        first, budget = self._reservation()
        visit = Visit(iteration=state.iteration, pick=pick, inherited_from=parent,
                      lineage_start=self._lineage(parent))
        p = Pending(visit, first, budget, start, own=parent == pick.workflow)
        state.pending.append(p)
        self.progress(f"[visit {state.iteration}] {Workflow.from_index(pick.workflow)}  "
                      f"({describe_pick(pick, self.cfg)}; from {visit_source(parent, pick.workflow)}"
                      f"; {budget} episodes reserved, {len(state.pending) - 1} in flight)")
        self._commit(None)
        return p

    def _job(self, p: Pending) -> dict:
        """What a pool needs to train visit p (wfrl.search.visits.run_visit)."""
        start = (None if p.start is None else
                 load_checkpoint(self.run / "checkpoints" / p.start))
        return {"config": self.cfg.to_dict(), "visit": as_plain(p.visit),
                "first_episode": p.first_episode, "budget": p.budget, "start": start,
                "own": p.own, "collector": self._visit_collector, "progress": True}

    def _tell_pending(self, p: Pending, result: dict) -> None:
        """The oldest visit in flight ended: its updates join training_log.csv (counted in visit
        order), its policy is saved, the optimizer is told, and the state is committed."""
        cfg, state = self.cfg, self.state
        visit = visit_from_json(result["visit"])
        wf = Workflow.from_index(visit.workflow)
        before = state.episodes_used
        for row, ustats in result["rows"]:
            state.episodes_used = before + row["Episodes"]
            row["Total_Episodes_Sampled"] = state.episodes_used
            state.updates += 1
            self._log_update(row, ustats)
        state.trained[wf.index] = state.trained.get(wf.index, 0) + visit.episodes
        state.episode_mark = max(state.episode_mark, p.first_episode + visit.episodes)
        save_checkpoint(checkpoint_path(self.run, wf.index), state_payload(
            result["payload"], cfg.ppo, str(wf), wf.index,
            episodes=state.trained[wf.index], config=cfg.to_dict()))
        state.pending.pop(0)
        self._tell_visit(visit, result["complete"], result["eval_episodes"])
        self.progress(f"  told {len(state.visits)} visits | {self._rate():6.1f} eps/s | budget "
                      f"left {cfg.total_episodes - state.episodes_used} | {self._eta()}")
        self._commit(None)
        if p.start is not None and p.start.startswith("start_"):
            self._writer.flush()       # committed without it before it goes
            (self.run / "checkpoints" / p.start).unlink(missing_ok=True)
