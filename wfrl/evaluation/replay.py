"""An episode, recorded step by step, and the pages that show it (`wfrl replay`, `wfrl report`).

record_episode plays one episode of a checkpoint (greedy) or of any agent (wfrl.evaluation.agents) and
keeps, per step: blue's action, red's action and its success, the reward and its running sum,
red's true access per host (info["red_access"] of the backends), the decoys in place, and for
each fix whether it complied with the workflow. replay_html turns that into one self-contained
page (inline CSS, JS and SVG; no request leaves it); report_html adds a run's learning curves
and the search's posterior and feasibility relations around the replay of its best policy.
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path

import numpy as np

from wfrl.envs.actions import HOSTS, action_name
from wfrl.errors import UserError

SUBNETS = (("User", ("User0", "User1", "User2", "User3", "User4")),
           ("Enterprise", ("Enterprise0", "Enterprise1", "Enterprise2", "Defender")),
           ("Operational", ("Op_Server0", "Op_Host0", "Op_Host1", "Op_Host2")))
ACCESS_COLOURS = ("#dfe8df", "#f0a030", "#c0282d")     # none, user, privileged
ACCESS_NAMES = ("no access", "user", "privileged")
class _PlanningAgent:
    """A checkpoint's greedy policy improved by decision-time search (wfrl.evaluation.planner)
    behind the agent interface; each episode's planner streams are keyed by its number within the replay."""

    def __init__(self, path: str, workflow: str | None, backend: str, red_agent: str, plan):
        from wfrl.evaluation.planner import PlanningPolicy
        budget, self.red = plan
        self.policy = PlanningPolicy(path, backend, budget, self.red, workflow)
        self.workflow = self.policy.workflow
        self.red_agent = red_agent
        self.episode = 0
        self.policy.reset(red_agent, key=0)

    def get_action(self, observation, action_space):
        return self.policy.act(np.asarray(observation, np.float32))

    def end_episode(self):
        self.episode += 1
        self.policy.reset(self.red_agent, key=self.episode)


def record_episode(backend: str = "sim", red_agent: str = "B_lineAgent", seed: int = 153,
                   episode: int = 0, steps: int = 100, checkpoint: str | None = None,
                   agent: str | None = None, workflow: str | None = None,
                   plan: tuple | None = None) -> dict:
    """One episode (global number `episode`, seeds as every wfrl evaluation derives them from
    (seed, episode)) of a checkpoint or an agent, step by step (see the module docstring).
    plan: (wfrl.evaluation.planner.PlanBudget, plan red) to play the checkpoint's greedy policy improved by
    decision-time search."""
    from wfrl.envs import make_backend
    from wfrl.envs.base import check_backend, check_red_agent, is_leaderboard
    from wfrl.evaluation.agents import CheckpointAgent, make_agent, play_episodes
    from wfrl.workflow import Workflow, fix_target, is_compliant
    check_backend(backend)
    check_red_agent(red_agent, allow_mixed=False)
    if (checkpoint is None) == (agent is None):
        raise UserError("give one of --checkpoint or --agent")
    if steps < 1:
        raise UserError(f"--steps must be positive (got {steps})")
    if plan is not None and checkpoint is None:
        raise UserError("--plan searches around a checkpoint's policy: give --checkpoint")
    player: object   # (an agent: get_action(observation, action_space))
    if checkpoint is not None and plan is not None:
        player = _PlanningAgent(checkpoint, workflow, backend, red_agent, plan)
        workflow, who = player.workflow, f"checkpoint {checkpoint} with decision-time search"
    elif checkpoint is not None:
        player = CheckpointAgent(checkpoint, workflow, is_leaderboard(backend))
        workflow, who = player.workflow, f"checkpoint {checkpoint}"
    else:
        assert agent is not None   # (one of checkpoint and agent: checked above)
        player, who = make_agent(agent, workflow), f"agent {agent}"
        if workflow is not None:
            Workflow.parse(workflow)
    wf = Workflow.parse(workflow) if workflow else None
    env = make_backend(backend, red_agent)
    rows: list[dict]
    start: list[int]
    rows, start = [], []

    def record(t, obs, a, reward, before, after):
        if t == 0:
            start.extend(int(x) for x in before)
        red, target, ok = env.last_red_action()
        h = fix_target(a)
        rows.append({
            "blue": action_name(a), "blue_action": int(a),
            "red": f"{red} {target}".strip(), "red_ok": bool(ok),
            "reward": round(float(reward), 2),
            "total": round((rows[-1]["total"] if rows else 0.0) + float(reward), 2),
            "access": [int(x) for x in after],
            "decoys": [int(x) for x in env.decoys()],
            "fix": None if h < 0 else {"host": HOSTS[h], "compliant": None if wf is None else
                                       bool(is_compliant(wf, before, h))}})

    try:
        play_episodes(agent or checkpoint, player, env, backend, red_agent, steps, [episode],
                      seed, workflow, record=record)
    finally:
        env.close()
    return {"backend": backend, "red_agent": red_agent, "seed": seed, "episode": episode,
            "policy": who, "workflow": workflow, "hosts": list(HOSTS),
            "subnets": [[name, list(hosts)] for name, hosts in SUBNETS],
            "start_access": start, "steps": rows,
            "return": rows[-1]["total"] if rows else 0.0}


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:18px 0 6px}
.sub{color:#555;margin-bottom:10px}
#controls{display:flex;gap:8px;align-items:center;margin:8px 0}
#controls button{font-size:14px;padding:3px 10px}
#slider{flex:1;max-width:640px}
#panel{display:flex;gap:18px;flex-wrap:wrap}
#now{min-width:300px}
#now td{padding:2px 8px 2px 0;vertical-align:top}
.ok{color:#1a7f37}.bad{color:#c0282d}
#log{max-height:300px;overflow:auto;border:1px solid #ddd;background:#fff}
#log table{border-collapse:collapse;font-size:12px}
#log td,#log th{padding:1px 6px;border-bottom:1px solid #eee;text-align:left;white-space:nowrap}
#log tr.cur{background:#fff3c4}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;border:1px solid #999}
table.data{border-collapse:collapse;font-size:12px}
table.data td,table.data th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}
"""

# The replay's script: reads the JSON in #replay-data, draws the step the slider shows.
_JS = r"""
(function(){
const D = JSON.parse(document.getElementById('replay-data').textContent);
const COL = %(colours)s, ACC = %(names)s, KINDS = %(kinds)s;
const N = D.steps.length, slider = document.getElementById('slider');
slider.max = N;
let timer = null;
function accessAt(t){ return t === 0 ? D.start_access : D.steps[t-1].access; }
function decoysAt(t){ return t === 0 ? D.hosts.map(()=>0) : D.steps[t-1].decoys; }
function esc(s){ const e = document.createElement('span'); e.textContent = s; return e.innerHTML; }
function show(t){
  t = Math.max(0, Math.min(N, t|0));
  slider.value = t;
  const acc = accessAt(t), dec = decoysAt(t);
  D.hosts.forEach((h, i) => {
    const r = document.getElementById('host-' + h);
    r.setAttribute('fill', COL[acc[i]]);
    r.setAttribute('data-access', acc[i]);
    const kinds = KINDS.filter((k, j) => (dec[i] >> j) & 1);
    const d = document.getElementById('decoys-' + h);
    d.textContent = kinds.length ? 'decoys: ' + kinds.join(', ') : '';
    r.querySelector('title').textContent = h + ': ' + ACC[acc[i]] +
      (kinds.length ? '; decoys ' + kinds.join(', ') : '');
  });
  const s = t > 0 ? D.steps[t-1] : null;
  document.getElementById('t').textContent = t + ' / ' + N;
  document.getElementById('blue').innerHTML = s ? esc(s.blue) + (s.fix ? (s.fix.compliant === null
    ? ' (fix)' : s.fix.compliant ? ' <b class="ok">compliant fix</b>'
    : ' <b class="bad">non-compliant fix</b>') : '') : '&mdash;';
  document.getElementById('red').innerHTML = s ? esc(s.red) + (s.red_ok ? ' <span class="ok">'
    + '(succeeded)</span>' : ' <span class="bad">(failed)</span>') : '&mdash;';
  const mk = document.getElementById('curve-mark');
  mk.setAttribute('cx', curveX(t)); mk.setAttribute('cy', curveY(s ? s.total : 0));
  document.getElementById('reward').textContent = s ? s.reward.toFixed(1) : '0.0';
  document.getElementById('total').textContent = s ? s.total.toFixed(1) : '0.0';
  document.querySelectorAll('#log tr.cur').forEach(r => r.classList.remove('cur'));
  const row = document.getElementById('row-' + t);
  if (row) { row.classList.add('cur'); }
}
const lo = Math.min(0, ...D.steps.map(s => s.total)), CW = 560, CH = 110;
function curveX(t){ return 40 + t / Math.max(1, N) * (CW - 50); }
function curveY(v){ return 10 + (lo === 0 ? 0 : v / lo) * (CH - 30); }
(function(){
  const pts = [[0, 0]].concat(D.steps.map((s, i) => [i + 1, s.total]));
  document.getElementById('curve-line').setAttribute('points',
    pts.map(p => curveX(p[0]).toFixed(1) + ',' + curveY(p[1]).toFixed(1)).join(' '));
  document.getElementById('curve-lo').textContent = lo.toFixed(1);
  D.steps.forEach((s, i) => { if (s.fix) {
    const c = document.createElementNS('http://www.w3.org/2000/svg', 'line');
    c.setAttribute('x1', curveX(i + 1)); c.setAttribute('x2', curveX(i + 1));
    c.setAttribute('y1', CH - 14); c.setAttribute('y2', CH - 6);
    c.setAttribute('stroke', s.fix.compliant === false ? '#c0282d' : '#1a7f37');
    document.getElementById('curve').appendChild(c); } });
})();
function play(){
  if (timer) { clearInterval(timer); timer = null; btn.textContent = 'play'; return; }
  if (+slider.value >= N) show(0);
  btn.textContent = 'pause';
  timer = setInterval(() => { if (+slider.value >= N) { play(); } else { show(+slider.value + 1); } },
                      250);
}
const btn = document.getElementById('play');
btn.addEventListener('click', play);
document.getElementById('back').addEventListener('click', () => show(+slider.value - 1));
document.getElementById('fwd').addEventListener('click', () => show(+slider.value + 1));
slider.addEventListener('input', () => show(+slider.value));
const log = document.getElementById('logbody');
D.steps.forEach((s, i) => {
  const tr = document.createElement('tr');
  tr.id = 'row-' + (i + 1);
  const fix = s.fix ? (s.fix.compliant === null ? 'fix' : s.fix.compliant ? 'compliant'
                                                                          : 'NON-compliant') : '';
  [i + 1, s.blue, fix, s.red + (s.red_ok ? '' : ' (failed)'), s.reward.toFixed(1),
   s.total.toFixed(1)].forEach(v => { const td = document.createElement('td');
                                     td.textContent = v; tr.appendChild(td); });
  tr.addEventListener('click', () => show(i + 1));
  log.appendChild(tr);
});
const m = /[#&]t=(\d+)/.exec(location.hash);
show(m ? +m[1] : 0);
})();
"""


def _hosts_svg() -> str:
    """The 13 hosts by subnet: one box per subnet, one rect per host (id host-NAME)."""
    w, box_w = 290, 270
    parts = []
    for c, (name, hosts) in enumerate(SUBNETS):
        x = 10 + c * w
        parts.append(f'<rect x="{x}" y="10" width="{box_w}" height="{40 + 62 * 5}" rx="8" '
                     f'fill="#fff" stroke="#888"/><text x="{x + 10}" y="32" '
                     f'font-weight="bold">{name} subnet</text>')
        for i, h in enumerate(hosts):
            y = 44 + 62 * i
            parts.append(f'<rect id="host-{h}" x="{x + 10}" y="{y}" width="{box_w - 20}" '
                         f'height="50" rx="5" stroke="#444" fill="{ACCESS_COLOURS[0]}">'
                         f'<title>{h}</title></rect><text x="{x + 20}" y="{y + 20}" '
                         f'pointer-events="none">{h}</text><text id="decoys-{h}" x="{x + 20}" '
                         f'y="{y + 40}" font-size="11" pointer-events="none"></text>')
    return (f'<svg id="hosts" xmlns="http://www.w3.org/2000/svg" width="{3 * w}" '
            f'height="{60 + 62 * 5}" font-size="13">{"".join(parts)}</svg>')


def replay_section(data: dict) -> str:
    """The replay's HTML (controls, host map, step panel, log) with its data and script."""
    from wfrl.envs.actions import DECOY_KINDS
    legend = "".join(f'<span style="background:{c}"></span>{n}'
                     for c, n in zip(ACCESS_COLOURS, ACCESS_NAMES))
    wf = data["workflow"] or "none (fixes not judged)"
    script = _JS % {"colours": json.dumps(ACCESS_COLOURS), "names": json.dumps(ACCESS_NAMES),
                    "kinds": json.dumps(DECOY_KINDS)}
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return f"""
<div class="sub">{html.escape(data['policy'])} vs {html.escape(data['red_agent'])} on
{html.escape(data['backend'])}, seed {data['seed']}, episode {data['episode']},
{len(data['steps'])} steps; workflow: {html.escape(wf)}; return {data['return']:.1f}</div>
<div class="legend">red's true access:{legend}</div>
<div id="controls"><button id="play">play</button><button id="back">&lsaquo; step</button>
<button id="fwd">step &rsaquo;</button><input id="slider" type="range" min="0" value="0">
<span>step <b id="t"></b></span></div>
<div id="panel">{_hosts_svg()}
<div id="now"><svg id="curve" xmlns="http://www.w3.org/2000/svg" width="560" height="110"
font-size="11"><text x="40" y="9">running reward (ticks: fixes, green compliant, red not)</text>
<text x="2" y="14">0</text><text id="curve-lo" x="2" y="84"></text>
<line x1="40" y1="10" x2="40" y2="90" stroke="#888"/><line x1="40" y1="10" x2="550" y2="10"
stroke="#ccc"/><polyline id="curve-line" fill="none" stroke="#1f5fa8" stroke-width="1.5"/>
<circle id="curve-mark" r="4" fill="#1f5fa8"/></svg><table><tr><td>blue</td><td id="blue"></td></tr><tr><td>red</td>
<td id="red"></td></tr><tr><td>reward</td><td id="reward"></td></tr><tr><td>total</td>
<td id="total"></td></tr></table>
<div id="log"><table><thead><tr><th>t</th><th>blue</th><th>fix</th><th>red</th><th>reward</th>
<th>total</th></tr></thead><tbody id="logbody"></tbody></table></div></div></div>
<script type="application/json" id="replay-data">{payload}</script>
<script>{script}</script>"""


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            f"style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
            f"{body}</body></html>\n")


def replay_html(data: dict) -> str:
    return _page("wfrl replay", f"<h1>wfrl replay</h1>{replay_section(data)}")


# ---------------------------------------------------------------------------------- the report

def _floats(rows, key):
    out = []
    for r in rows:
        try:
            v = float(r.get(key, "nan"))
        except (TypeError, ValueError):
            v = math.nan
        out.append(v)
    return out


def _line_chart(title, xs, series, y_label, width=640, height=220) -> str:
    """An SVG line chart of series [(name, ys, colour)] over xs (NaNs skipped)."""
    pts = [(x, y) for _, ys, _ in series for x, y in zip(xs, ys) if math.isfinite(y)]
    if not pts:
        return f"<p>{html.escape(title)}: no data</p>"
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)
    L, R, T, B = 60, 10, 24, 30

    def sx(x):
        return L + (x - x0) / (x1 - x0) * (width - L - R)

    def sy(y):
        return height - B - (y - y0) / (y1 - y0) * (height - T - B)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-size="11"><text x="{L}" y="14" font-weight="bold">{html.escape(title)}</text>',
           f'<line x1="{L}" y1="{height - B}" x2="{width - R}" y2="{height - B}" stroke="#888"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{height - B}" stroke="#888"/>',
           f'<text x="4" y="{T + 10}">{y1:.3g}</text><text x="4" y="{height - B}">{y0:.3g}</text>',
           f'<text x="{L}" y="{height - 8}">{x0:.6g}</text>'
           f'<text x="{width - R - 60}" y="{height - 8}">{x1:.6g}</text>',
           f'<text x="{L + 60}" y="{height - 8}">{html.escape(y_label)}</text>']
    for k, (name, ys, colour) in enumerate(series):
        seg = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys) if math.isfinite(y))
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{seg}"/>'
                   f'<text x="{width - R - 150}" y="{T + 12 * k + 4}" fill="{colour}">'
                   f'{html.escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def _table(rows, cols) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols)
                   + "</tr>" for r in rows)
    return f'<table class="data"><tr>{head}</tr>{body}</table>'


def _json_record(path: Path) -> tuple[dict, str | None]:
    """(contents, None) of one of a run's JSON records, {} when there is none; ({}, what is wrong)
    when it cannot be read or is not a JSON object (a truncated file, say). Reads only."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, None
    except json.JSONDecodeError as exc:
        return {}, f"not valid JSON: {exc}"
    except (OSError, UnicodeDecodeError) as exc:
        return {}, f"cannot be read: {getattr(exc, 'strerror', None) or exc.__class__.__name__}"
    if not isinstance(d, dict):
        return {}, "not a JSON object"
    return d, None


def best_policy(run: Path) -> tuple[str, str | None, str]:
    """(checkpoint path, workflow, which) of a run's best policy: a search's best workflow (the
    one its summary vouches for, else its visit of highest reward), else a training run's best.pt
    (periodic evaluation) or checkpoint.pt. A damaged summary.json counts as none."""
    from wfrl.runlog import checkpoint_path, read_csv
    s, _ = _json_record(run / "summary.json")
    if s.get("best_workflow_id") is not None:
        path = checkpoint_path(run, int(s["best_workflow_id"]))
        if Path(path).exists():
            return str(path), s["best_workflow"], "the search's best workflow"
    if (run / "gp_sampling_log.csv").exists():
        visits = [r for r in read_csv(run / "gp_sampling_log.csv")
                  if Path(checkpoint_path(run, int(r["Workflow_ID"]))).exists()]
        if visits:
            r = max(visits, key=lambda r: float(r["Reward"]))
            return (str(checkpoint_path(run, int(r["Workflow_ID"]))), r["Workflow"],
                    "the visit of highest reward (the search vouches for no workflow)")
    for name in ("best.pt", "checkpoint.pt"):
        if (run / name).exists():
            return str(run / name), None, name
    raise UserError(f"{run} holds no policy to replay (no search checkpoint, best.pt or "
                    "checkpoint.pt)")


def _png(path: Path, title: str) -> str:
    import base64
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<h2>{html.escape(title)}</h2><img alt="{html.escape(title)}" ' \
           f'style="max-width:100%" src="data:image/png;base64,{data}">'


# the run's JSON records a report checks; a damaged one is left out of the page, with a warning
REPORT_JSON_RECORDS = ("experiment_config.json", "summary.json")


def report_html(run_dir, backend="sim", red_agent="B_lineAgent", seed=153, episode=0,
                warnings: list | None = None) -> str:
    """A run's page: learning curves (training_log.csv, eval_log.csv), the search's visits and
    posterior (gp_sampling_log.csv, summary.json) and the replay of its best policy.

    A damaged JSON record (experiment_config.json or summary.json unreadable, truncated, not an
    object) does not stop the page: it is built from the records that can be read, names the
    damaged file at its top, and the same sentence is appended to `warnings` (for the command to
    print). Nothing in run_dir is changed."""
    from wfrl.runlog import read_csv
    run = Path(run_dir)
    if not (run / "training_log.csv").exists():
        raise UserError(f"{run} is not a wfrl run directory (no training_log.csv)")
    parts = [f"<h1>wfrl run {html.escape(run.name)}</h1>"]
    records = {}
    for name in REPORT_JSON_RECORDS:
        records[name], problem = _json_record(run / name)
        if problem is not None:
            note = f"{run / name} is damaged ({problem}); the page is built without it"
            parts.append(f"<p><strong>Warning:</strong> {html.escape(note)}</p>")
            if warnings is not None:
                warnings.append(note)
    log = read_csv(run / "training_log.csv")
    xs = _floats(log, "Total_Episodes_Sampled")
    parts.append("<h2>Learning curves (training_log.csv)</h2>")
    parts.append(_line_chart("environment reward per episode", xs,
                             [("Env_Reward", _floats(log, "Env_Reward"), "#1f5fa8")],
                             "episodes sampled"))
    parts.append(_line_chart("workflow compliance", xs,
                             [("Compliance", _floats(log, "Compliance"), "#1a7f37")],
                             "episodes sampled"))
    if (run / "eval_log.csv").exists():
        ev = read_csv(run / "eval_log.csv")
        parts.append(_line_chart("periodic greedy evaluation (eval_log.csv)",
                                 _floats(ev, "Episodes"),
                                 [("Reward", _floats(ev, "Reward"), "#7a3fb0")], "episodes"))
    if (run / "gp_sampling_log.csv").exists():
        gp = read_csv(run / "gp_sampling_log.csv")
        it = _floats(gp, "Iteration")
        parts.append("<h2>The search (gp_sampling_log.csv)</h2>")
        parts.append(_line_chart("visits: measured reward and the posterior mean before each",
                                 it, [("Reward", _floats(gp, "Reward"), "#1f5fa8"),
                                      ("Posterior_Mean", _floats(gp, "Posterior_Mean"),
                                       "#c06000")], "visit"))
        parts.append(_line_chart("P(feasible) of each visited workflow and its compliance", it,
                                 [("P_Feasible", _floats(gp, "P_Feasible"), "#c0282d"),
                                  ("Final_Compliance", _floats(gp, "Final_Compliance"),
                                   "#1a7f37")], "visit"))
        parts.append(_table(gp, ["Iteration", "Workflow", "Reward", "Reward_SE",
                                 "Final_Compliance", "Posterior_Mean", "Posterior_SD",
                                 "P_Feasible", "Stop_Reason"]))
    if records["summary.json"]:
        s = records["summary.json"]
        if s.get("top"):
            parts.append("<h2>Posterior of the workflows it vouches for (summary.json)</h2>")
            parts.append(_table(s["top"], ["workflow", "posterior_mean", "posterior_sd",
                                           "p_best", "p_feasible", "reward", "compliance",
                                           "visits"]))
        if s.get("feasibility_relations") is not None:
            rel = s["feasibility_relations"] or ["none found"]
            parts.append("<h2>Feasibility relations</h2><ul>" + "".join(
                f"<li>{html.escape(str(r))}</li>" for r in rel) + "</ul>")
        if s.get("distinguishable"):
            parts.append(f"<p>{html.escape(str(s['distinguishable']))}</p>")
    for name, title in (("learning_curves.png", "The run's learning-curve plot"),
                        ("search_posterior.png", "The run's posterior plot")):
        if (run / name).exists():
            parts.append(_png(run / name, title))
    path, workflow, which = best_policy(run)
    data = record_episode(backend, red_agent, seed, episode, checkpoint=path, workflow=workflow)
    parts.append(f"<h2>Replay of its best policy</h2><p>{html.escape(which)}: "
                 f"{html.escape(Path(path).name)}</p>" + replay_section(data))
    return _page(f"wfrl run {run.name}", "".join(parts))


def write_page(path, text: str) -> None:
    from wfrl.runlog import atomic_write_bytes
    try:
        atomic_write_bytes(Path(path), text.encode())
        Path(path).chmod(0o644)          # a page to share (mkstemp made it private)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
