"""The interactive page (--html) at MiniLM's longest input, 512 word pieces, in headless
Chromium (the system's, driven by Playwright as tests/browser.py does): the time to its first
draw and to a hover's redraw.

    python benchmarks/page.py [--runs 5] [--hovers 20]

Pages: `scores` (the head view of layer 6's twelve heads and their mean, the heatmap) and
`heads --layer 6` (the model view's twelve thumbnails, the head view of every head, the
heatmap) over 512 pieces. First draw: from the navigation's start to the end of the page's
script, every view drawn (the HTML read, its JSON parsed), and to that first frame painted.
A hover: a token's mouseenter to its frame painted, its lines and top attended redrawn, over
`--hovers` tokens spread over the input; the script's own share beside it. Medians.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))
from browser import launch  # noqa: E402: the browser the tests drive
from model import LONG  # noqa: E402: 512 word pieces
from startup import machine  # noqa: E402

ATTNCLI = str(Path(sys.executable).parent / "attncli")

HOVER = """async (k) => {
    const b = document.querySelectorAll('.column.left button')[k];
    const start = performance.now();
    b.dispatchEvent(new MouseEvent('mouseenter'));
    const script = window.attncliLastDraw;
    // the frame of the hover painted: the callback of the frame after it
    const frame = await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))));
    return [frame - start, script];
}"""


def pages(folder: Path) -> dict[str, Path]:
    made = {}
    for name, args in {"scores, 512 pieces, 12 heads and their mean": ["scores", LONG, "--model", "minilm"],
                       "heads --layer 6, 512 pieces": ["heads", LONG, "--model", "minilm", "--layer", "6"]}.items():
        path = folder / f"{args[0]}.html"
        subprocess.run([ATTNCLI, *args, "--html", str(path), "--json"], check=True, stdout=subprocess.DEVNULL)
        made[name] = path
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hovers", type=int, default=20)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        made = pages(Path(tmp))
        browser = launch(p)
        version = browser.version
        results = {name: {"ready": [], "frame": [], "hover": [], "script": []} for name in made}
        for _ in range(args.runs):
            for name, path in made.items():
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                page = context.new_page()
                page.goto(path.as_uri(), timeout=120_000)
                page.wait_for_selector("body[data-ready=true]", timeout=120_000)
                page.wait_for_function("window.attncliPainted !== undefined")
                results[name]["ready"].append(page.evaluate("window.attncliReady"))
                results[name]["frame"].append(page.evaluate("window.attncliPainted"))
                count = page.locator(".column.left button").count()
                for k in range(args.hovers):
                    frame, script = page.evaluate(HOVER, (k * 97) % count)
                    results[name]["hover"].append(frame)
                    results[name]["script"].append(script)
                context.close()
        browser.close()
        sizes = {name: path.stat().st_size / 1e6 for name, path in made.items()}
    print(f"machine: {machine()}; Chromium {version}")
    print(f"median of {args.runs} loads each, {args.hovers} hovers a load\n")
    print("| page | size (MB) | first draw: script done (ms) | first frame painted (ms) | a hover, to its frame painted (ms) "
          "| its script (ms) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        print(f"| {name} | {sizes[name]:.1f} | {statistics.median(r['ready']):.0f} | {statistics.median(r['frame']):.0f} "
              f"| {statistics.median(r['hover']):.1f} | {statistics.median(r['script']):.1f} |")


if __name__ == "__main__":
    main()
