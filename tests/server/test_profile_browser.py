"""``%%eugo --profile`` in JupyterLab + headless Chromium: the icicle view renders offline, zooms, escapes text.

Screenshots go to ``test-output/profile-icicle.png`` and ``profile-icicle-zoomed.png``.
"""

from __future__ import annotations

import pytest
from test_browser import OUT, _lab_with, _page, _run_all

pytestmark = pytest.mark.slow

EVIL = "<img src=x onerror=alert(1)>"
CELL = f'''%%eugo -w 2 --no-live --profile
from eugo_lab import hpc

def spin(n):
    total = 0
    for i in range(n):
        total += abs(i % 7 - 3)
    return total

def evil(n):
    total = 0
    for i in range(n):
        total += abs(i % 5 - 2)
    return total

evil.__code__ = evil.__code__.replace(co_name={EVIL!r})  # user text that must stay text

@hpc.remote
def outer(n):
    return spin(n) + evil(n // 3)

sum(hpc.get([outer.remote(600_000) for _ in range(8)]))'''

# Every drawn block of the first icicle: its label, box on screen, and data attributes.
BLOCKS = """() => {
  const box = document.querySelector('.eugo-icicle');
  box.scrollIntoView({block: 'center'});
  return [...box.querySelectorAll('.eugo-block')].map(b => {
    const r = b.getBoundingClientRect();
    return {text: b.textContent, x: r.left, y: r.top, w: r.width, h: r.height, d: +b.dataset.d,
            visible: b.style.display !== 'none', cls: b.className};
  });
}"""


def test_profile_icicle_renders_zooms_and_escapes_in_chromium(tmp_path):
    with _lab_with(tmp_path, "profile.ipynb", ["%load_ext eugo_lab", CELL]) as lab, \
            _page(lab, "profile.ipynb") as (page, console, dialogs):
        _run_all(page)
        page.wait_for_selector(".eugo-icicle .eugo-block", timeout=120_000)
        blocks = page.evaluate(BLOCKS)
        page.screenshot(path=str(OUT / "profile-icicle.png"), full_page=True)
        by = {b["text"]: b for b in blocks}
        root = next(b for b in blocks if b["d"] == 0)
        assert root["text"] == "all tasks (8)" and root["w"] > 500, blocks
        outer, spin, evil = by["outer"], by["spin"], by[EVIL]  # the name arrives as text
        assert outer["d"] == 1 and spin["d"] == 2 and evil["d"] == 2, blocks
        # 3:1 by work; sampled every ~10 ms, so a few dozen samples per run: allow for their spread
        assert abs(outer["w"] - root["w"]) < 3 and spin["w"] > 1.2 * evil["w"] > 0, blocks
        assert outer["y"] > root["y"] and spin["y"] > outer["y"] and abs(spin["y"] - evil["y"]) < 1
        assert spin["x"] < evil["x"], blocks  # children largest first, left to right
        assert "eugo-app" in spin["cls"]
        text = page.inner_text(".eugo-profile")
        assert "Hottest functions" in text and "Hottest lines" in text and EVIL in text, text

        page.click(".eugo-icicle .eugo-block:text-is('spin')")  # zoom into spin
        zoomed = {b["text"]: b for b in page.evaluate(BLOCKS)}
        page.screenshot(path=str(OUT / "profile-icicle-zoomed.png"), full_page=True)
        assert abs(zoomed["spin"]["w"] - root["w"]) < 3 and not zoomed[EVIL]["visible"], zoomed
        page.click(".eugo-icicle .eugo-block:text-is('all tasks (8)')")  # and back
        back = {b["text"]: b for b in page.evaluate(BLOCKS)}
        assert back[EVIL]["visible"] and abs(back["spin"]["w"] - spin["w"]) < 2, back

        injected = page.evaluate("() => document.querySelectorAll('.jp-OutputArea img').length")
        assert injected == 0 and dialogs == [], (injected, dialogs, console[-10:])
        assert not [c for c in console if "Failed to load resource" in c], console  # nothing fetched and missing
