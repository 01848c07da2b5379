"""``%%eugo --profile`` in a real IPython shell: the merged profile follows the summary."""

from __future__ import annotations

from IPython.utils.capture import capture_output

from eugo_lab import hpc
from eugo_lab.cellrun import options as opt

SETUP = '''
from eugo_lab import hpc

def spin(n):
    total = 0
    for i in range(n):
        total += abs(i % 7 - 3)  # hot
    return total

@hpc.remote
def outer(n):
    return spin(n) + 1
'''
CELL = "hpc.get([outer.remote(300_000) for _ in range(8)])"


def test_profile_option_parses():
    assert opt.build(profile=True, available=["local"]).profile
    assert opt.build(available=["local"]).meta().get("profile") is None  # the trace's meta is as before when off
    assert opt.build(profile=True, available=["local"]).meta()["profile"] is True


def test_profile_report_follows_the_summary_in_a_kernel(ip, monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    monkeypatch.delenv("EUGO_LAB_BOKEH_URL", raising=False)
    ip.run_cell(SETUP)
    with capture_output() as cap:
        value = ip.run_cell_magic("eugo", "-w 2 --no-live --profile", CELL)
    assert value == [sum(abs(i % 7 - 3) for i in range(300_000)) + 1] * 8
    datas = [o.data for o in cap.outputs]
    kinds = ["summary" if "eugo-summary" in d.get("text/html", "") else
             "profile" if "eugo-profile" in d.get("text/html", "") else "other" for d in datas]
    assert kinds[-2:] == ["summary", "profile"], kinds  # the profile comes right after the summary
    prof = datas[-1]
    text = prof["text/plain"]
    assert text.startswith("Profile: 8 tasks on 2 workers"), text
    lines = text.splitlines()
    top_fn = lines[3].split()
    # (a loaded 2-core VM can starve the sampler for a whole short task: its one sample then
    # lands anywhere in it, so the threshold leaves room for one such task of eight)
    assert top_fn[3] == "spin" and int(top_fn[0].rstrip("%")) >= 75, text
    assert "total += abs(i % 7 - 3)  # hot" in text
    assert "eugo-icicle" in prof["text/html"] and "<script>" in prof["text/html"]
    assert hpc.last_trace().meta["profile"] is True and len(hpc.last_trace().profiles) == 8


def test_profile_report_in_a_terminal_is_text(ip, monkeypatch, capsys):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")
    ip.run_cell(SETUP)
    ip.run_cell_magic("eugo", "-w 2 --profile", CELL)
    out = capsys.readouterr().out
    assert "Profile: 8 tasks on 2 workers" in out and "Hottest lines" in out, out
    assert out.index("%%eugo: 8 tasks") < out.index("Profile: 8 tasks")


def test_without_the_flag_no_task_is_profiled(ip, monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "kernel")
    ip.run_cell(SETUP)
    with capture_output() as cap:
        ip.run_cell_magic("eugo", "-w 2 --no-live", "hpc.get([outer.remote(10) for _ in range(4)])")
    assert hpc.last_trace().profiles == ()
    assert not any("eugo-profile" in o.data.get("text/html", "") for o in cap.outputs)
