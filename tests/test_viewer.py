"""The episode viewer (`wfrl replay`) and the run page (`wfrl report`), opened in a real headless
Chromium (Debian's package; scripts/setup.sh installs it): the page loads without a console error
or any network request, its slider reaches every step, the host colours shown at step t are the
red access recorded for step t, play runs to the end, and a 100-step page stays under 2 MB.

The checks drive the page from a harness page that holds it in a frame (so nothing test-only is in
the product) and read what Chromium rendered (computed fill colours); the network check reads
Chromium's own net log, where a request a page makes carries a file:// isolation key."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from wfrl.cli import main
from wfrl.envs.actions import HOSTS
from wfrl.evaluation.replay import ACCESS_COLOURS, record_episode, replay_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("WFRL_REQUIRE_CHROMIUM"):
    raise RuntimeError("WFRL_REQUIRE_CHROMIUM is set but chromium is not installed")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                    "(scripts/setup.sh installs Debian's package with apt-get)")
AGENTS = Path(__file__).resolve().parent / "agents" / "cage2_agents.py"

HARNESS = """<!DOCTYPE html><html><body><pre id="out">pending</pre>
<iframe id="f" src="%(page)s" width="1200" height="900"></iframe><script>
const HOSTS = %(hosts)s, f = document.getElementById('f');
f.addEventListener('load', () => {
  const w = f.contentWindow, d = f.contentDocument, s = d.getElementById('slider');
  const out = {max: +s.max, steps: []};
  for (let t = 0; t <= +s.max; t++) {
    s.value = t; s.dispatchEvent(new w.Event('input'));
    out.steps.push({value: +s.value, label: d.getElementById('t').textContent,
                    blue: d.getElementById('blue').textContent,
                    total: d.getElementById('total').textContent,
                    fills: HOSTS.map(h => w.getComputedStyle(d.getElementById('host-' + h)).fill),
                    decoys: HOSTS.map(h => d.getElementById('decoys-' + h).textContent)});
  }
  s.value = 0; s.dispatchEvent(new w.Event('input'));
  d.getElementById('play').click();
  setTimeout(() => { out.after_play = +s.value; out.play_label = d.getElementById('play')
    .textContent; document.getElementById('out').textContent = JSON.stringify(out); },
    300 * (+s.max) + 1000);
});
</script></body></html>"""


def run_chromium(page: Path, tmp_path: Path) -> tuple[dict | None, list, list]:
    """Open `page` inside the harness; returns (what the harness read, console lines, URLs
    the page requested over the network)."""
    harness = page.parent / "harness.html"
    harness.write_text(HARNESS % {"page": page.name, "hosts": json.dumps(HOSTS)})
    net = tmp_path / "net.json"
    res = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--allow-file-access-from-files", f"--user-data-dir={tmp_path / 'profile'}",
         "--enable-logging=stderr", "--v=0", f"--log-net-log={net}",
         "--virtual-time-budget=120000", "--dump-dom", harness.as_uri()],
        capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    console = [line for line in res.stderr.splitlines() if ":CONSOLE" in line]
    events = json.loads(net.read_text())
    types = {v: k for k, v in events["constants"]["logEventTypes"].items()}
    requested = [e["params"]["url"] for e in events["events"]
                 if types.get(e["type"]) == "URL_REQUEST_START_JOB"
                 and "file://" in e.get("params", {}).get("network_isolation_key", "")]
    start, end = res.stdout.find('<pre id="out">'), res.stdout.find("</pre>")
    text = res.stdout[start + len('<pre id="out">'):end]
    return (None if text == "pending" else json.loads(text.replace("&amp;", "&")
                                                      .replace("&lt;", "<").replace("&gt;", ">")
                                                      .replace("&quot;", '"'))), console, requested


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


@pytest.fixture(scope="module")
def episode():
    return record_episode("sim", "B_lineAgent", seed=153, episode=7,
                          checkpoint="pretrained:critical_first")


def test_recorded_episode_matches_the_evaluation(episode):
    """The recorded return is the return wfrl's evaluation plays for the same episode."""
    import numpy as np

    from wfrl.envs import make_backend
    from wfrl.evaluation.cage2 import policy_of_checkpoint
    from wfrl.evaluation.returns import play
    from wfrl.workflow import Workflow
    weights, net, wf, lam, foothold = policy_of_checkpoint("pretrained:critical_first")
    stats = play(make_backend("sim", "B_lineAgent"), weights, net, Workflow.parse(wf), lam,
                 foothold, [7], 153, True)
    steps = episode["steps"]
    assert len(steps) == 100
    assert episode["return"] == pytest.approx(stats[0].env_return, abs=1e-3)
    fixes = [s for s in steps if s["fix"]]
    assert len(fixes) == stats[0].fixes
    assert sum(s["fix"]["compliant"] for s in fixes) == stats[0].compliant_fixes
    assert episode["start_access"][HOSTS.index("User0")] == 2     # red's foothold
    assert any(a > 0 for s in steps for a in s["access"][:8])     # it got further
    assert any(s["red"].startswith("ExploitRemoteService") for s in steps)
    assert np.isfinite(episode["return"])
    _decoys_follow_blue(steps)


def _decoys_follow_blue(steps):
    """The decoys a backend reports are the ones blue placed: after DecoyX H at most kind X
    appears, only on H; after Restore H none is left on H; nothing else changes them."""
    from wfrl.envs.actions import DECOY_KINDS
    assert any(any(s["decoys"]) for s in steps)
    before = [0] * len(HOSTS)
    for t, s in enumerate(steps):
        now = s["decoys"]
        name, _, host = s["blue"].partition(" ")
        for h in range(len(HOSTS)):
            if host == HOSTS[h] and name.startswith("Decoy"):
                k = DECOY_KINDS.index(name[len("Decoy"):])
                assert now[h] & ~before[h] in (0, 1 << k) and before[h] & ~now[h] == 0, (t, s)
            elif host == HOSTS[h] and name == "Restore":
                assert now[h] == 0, (t, s)
            else:
                assert now[h] == before[h], (t, h, s)
        before = now


@needs_chromium
def test_replay_page_in_headless_chromium(episode, tmp_path):
    page = tmp_path / "replay.html"
    page.write_text(replay_html(episode))
    assert page.stat().st_size < 2_000_000
    seen, console, requested = run_chromium(page, tmp_path)
    assert console == [] and requested == []
    assert seen is not None, "the harness never finished"
    steps = episode["steps"]
    assert seen["max"] == len(steps) == 100
    assert [s["value"] for s in seen["steps"]] == list(range(101))       # every step reached
    for t, shown in enumerate(seen["steps"]):
        access = episode["start_access"] if t == 0 else steps[t - 1]["access"]
        assert shown["fills"] == [_rgb(ACCESS_COLOURS[a]) for a in access], t
        assert shown["label"] == f"{t} / 100"
        if t:
            assert shown["blue"].startswith(steps[t - 1]["blue"])
            assert float(shown["total"]) == pytest.approx(steps[t - 1]["total"], abs=0.06)
            decoys = [bin(d).count("1") for d in steps[t - 1]["decoys"]]
            assert [len(x.split(",")) if x else 0 for x in shown["decoys"]] == decoys
    assert seen["after_play"] == 100 and seen["play_label"] == "play"
    assert len({tuple(s["fills"]) for s in seen["steps"]}) > 1          # the colours change


@needs_chromium
def test_the_chromium_checks_can_fail(tmp_path):
    """A page with a script error and a network request is caught by both checks."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/x.png">'
                    "<script>fetch('https://example.invalid/y').catch(() => {}); "
                    "missingFunction();</script></body></html>")
    _, console, requested = run_chromium(page, tmp_path)
    assert any("missingFunction" in line for line in console)
    assert {"http://example.invalid/x.png", "https://example.invalid/y"} <= set(requested)


def test_replay_command(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["replay", "--agent", f"{AGENTS}:restorer", "--red-agent", "RedMeanderAgent",
                 "--seed", "3", "--steps", "30", "--workflow", "critical_first",
                 "--html", str(out)]) == 0
    text = out.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")   # (a name, not a URL)
    assert "https://" not in text and "<link" not in text and " src=" not in text
    data = json.loads(text.split('id="replay-data">')[1].split("</script>")[0])
    assert len(data["steps"]) == 30 and data["workflow"] == "critical_first"
    assert all(s["fix"]["compliant"] in (True, False) for s in data["steps"] if s["fix"])
    for argv, says in ((["--html", str(out)], "one of --checkpoint or --agent"),
                       (["--checkpoint", "pretrained:critical_first", "--backend", "nope",
                         "--html", str(out)], "unknown backend"),
                       (["--checkpoint", "pretrained:critical_first",
                         "--html", str(tmp_path / "no" / "x.html")], "cannot write"),
                       (["--agent", f"{AGENTS}:crashing", "--html", str(out)], "crashed on")):
        capsys.readouterr()
        assert main(["replay", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err


@pytest.mark.cyborg
def test_replay_on_cyborg_reads_red_actions_and_decoys(tmp_path):
    data = record_episode("cyborg", "B_lineAgent", seed=153, episode=7, steps=30,
                          checkpoint="pretrained:critical_first")
    sim = record_episode("sim", "B_lineAgent", seed=153, episode=7, steps=30,
                         checkpoint="pretrained:critical_first")
    # both backends name red's actions alike: the action, then a subnet or a host
    hosts = "|".join(HOSTS)
    pattern = re.compile(rf"Sleep|DiscoverRemoteSystems (User|Enterprise|Operational)|"
                         rf"(DiscoverNetworkServices|ExploitRemoteService|PrivilegeEscalate|"
                         rf"Impact) ({hosts})")
    for rec in (data, sim):
        assert all(pattern.fullmatch(s["red"]) for s in rec["steps"]), rec["steps"]
        assert rec["steps"][0]["red"] == "DiscoverRemoteSystems User"
        assert any(s["red"].startswith("ExploitRemoteService ") for s in rec["steps"])
    _decoys_follow_blue(data["steps"])


def test_report_of_a_search_run(tmp_path, capsys):
    """The run page of a small search: learning curves, the search's visits, posterior and
    feasibility, the replay of its best policy; in Chromium (where installed) it loads cleanly
    and its replay works like the replay page's."""
    run = tmp_path / "run"
    assert main(["train", "--total-episodes", "150", "--episodes-per-update", "25",
                 "--pretrain-episodes", "25", "--hidden", "16", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["report", str(run)]) == 0
    text = (run / "report.html").read_text()
    for part in ("Learning curves", "The search", "Replay of its best policy", "<polyline",
                 'id="replay-data"'):
        assert part in text, part
    assert main(["report", str(tmp_path)]) == 2
    if CHROMIUM is not None:
        seen, console, requested = run_chromium(run / "report.html", tmp_path)
        assert console == [] and requested == []
        assert seen["max"] == 100 and [s["value"] for s in seen["steps"]] == list(range(101))


def test_bad_episode_flags_are_one_line_exit_2(tmp_path, capsys):
    """replay and report refuse a seed or episode number outside [0, 2^63) and a non-positive
    --steps in one line, given as flags or by --config, before anything is played or written."""
    page = tmp_path / "r.html"
    replay = ["replay", "--checkpoint", "pretrained:critical_first", "--html", str(page)]
    report = ["report", str(tmp_path), "--html", str(page)]
    toml = tmp_path / "episode.toml"
    toml.write_text("episode = -7\n")
    bad = "must be a whole number in [0, 2^63)"
    for argv, says in (
            ([*replay, "--episode", "-5"], f"--episode {bad} (got -5)"),
            ([*replay, "--episode", str(2 ** 63)], f"--episode {bad}"),
            ([*replay, "--seed", "-1"], f"--seed {bad} (got -1)"),
            ([*replay, "--steps", "0"], "--steps must be positive (got 0)"),
            ([*replay, "--config", str(toml)], f"--episode {bad}"),
            ([*report, "--episode", "-1"], f"--episode {bad} (got -1)"),
            ([*report, "--seed", "-3"], f"--seed {bad} (got -3)"),
            ([*report, "--config", str(toml)], f"--episode {bad}")):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"wfrl: error: {says}"), (argv, err)
        assert not page.exists()


def test_report_of_a_run_with_damaged_json_records(tmp_path, capsys):
    """A run whose experiment_config.json or summary.json is damaged (truncated) still gets its
    page, built from the records that can be read: the page and one warning line on stderr name
    the damaged file; no file of the run is changed."""
    run = tmp_path / "run"
    assert main(["train", "--workflow", "defender,enterprise,op_server,op_host,user",
                 "--total-episodes", "20", "--episodes-per-update", "10", "--hidden", "16",
                 "--collector", "sequential", "--out", str(run)]) == 0
    for name in ("experiment_config.json", "summary.json"):
        damaged = tmp_path / name
        shutil.copytree(run, damaged)
        text = (damaged / name).read_bytes()
        (damaged / name).write_bytes(text[: len(text) // 2])
        before = {p.name: p.read_bytes() for p in damaged.iterdir()}
        capsys.readouterr()
        assert main(["report", str(damaged)]) == 0
        out, err = capsys.readouterr()
        err = err.strip().splitlines()
        assert len(err) == 1, err
        assert err[0].startswith(f"wfrl: warning: {damaged / name} is damaged (not valid JSON"), err
        assert out.startswith("wrote ")
        page = (damaged / "report.html").read_text()
        for part in ("Learning curves", "Replay of its best policy", "<polyline",
                     f"{damaged / name} is damaged"):
            assert part in page, part
        assert {p.name: p.read_bytes() for p in damaged.iterdir()
                if p.name != "report.html"} == before
