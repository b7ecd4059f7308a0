"""Regenerate docs/images/replay-html.png: the seed job's `vcbus replay --html` page in headless chromium.

Usage: python scripts/replay_screenshot.py [OUT.png]   (`make docs-images`)

The page is written from examples/resnet-dist-train.json and shot the way the
browser tests look at it (tests/browser.py: Debian's chromium over DevTools),
with the raw record of the RestartJob action open. Fails on any console error.
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import Chromium, find_chromium  # noqa: E402
from vcbus.replay_html import html_for_log  # noqa: E402


def main() -> int:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "images" / "replay-html.png")
    chromium = find_chromium()
    if chromium is None:
        print("replay_screenshot: no chromium (make browser installs Debian's)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="vcbus-shot-") as tmp:
        os.chdir(ROOT)  # the page names its log as given: examples/...
        page = html_for_log("examples/resnet-dist-train.json", pathlib.Path(tmp) / "seed.html")
        browser = Chromium(chromium, width=1280, height=640)
        try:
            browser.open(page)
            browser.wait_for("document.body.dataset.ready === '1'")
            browser.click("[data-kind=action][data-action=RestartJob]")
            browser.wait_for("document.getElementById('raw').classList.contains('open')")
            browser.js("document.getElementById('raw-text').scrollTop = 0")
            if browser.errors:
                print("replay_screenshot: the page reported errors:\n" + "\n".join(browser.errors), file=sys.stderr)
                return 1
            browser.screenshot(out)
        finally:
            browser.close()
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
