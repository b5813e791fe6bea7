"""Screenshots of `moozi play --web` mid-game and of `moozi report`'s report.html, as the README shows them.

    python docs/img/screenshots.py --play RUN [--play RUN ...] --report RUN [--out docs/img]

Drives Debian's `chromium` headless with Playwright, as the browser test does. Each --play run gets
`play_<game>.png` after a few moves (the person plays the first free cell of the board's middle row or
column, then the first free ones); --report gets `report.png` (its first screen) and `report_full.png`.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import subprocess
import sys


def _server(run_dir: str):
    proc = subprocess.Popen([sys.executable, "-m", "moozi.cli", "play", run_dir, "--web", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    match = re.search(r"at (http://[^ ]+) \(bound to (\S+):", proc.stdout.readline())
    if not match:
        proc.terminate()
        raise SystemExit(f"moozi play --web did not start for {run_dir}")
    return proc, match.group(1)


def play_page(browser, run_dir: str, out: pathlib.Path, moves: int = 3) -> pathlib.Path:
    proc, url = _server(run_dir)
    try:
        page = browser.new_page(viewport={"width": 760, "height": 640})
        page.goto(url)
        page.wait_for_selector("rect.cell")
        game = page.title().split("play ", 1)[1].split(":")[-1]
        for _ in range(moves):
            cells = page.query_selector_all("rect.cell")
            count = len(page.query_selector_all("circle.stone"))
            free = [c for c in cells if c.get_attribute("fill") == "#e6c27a"]
            if not free or page.inner_text("#result"):
                break
            middle = [c for c in free if int(c.get_attribute("data-col")) == int(free[-1].get_attribute("data-col")) // 2 + 1]
            (middle or free)[0].click()
            page.wait_for_function(f"document.querySelectorAll('circle.stone').length > {count + 1} "
                                   "|| document.getElementById('result').textContent !== ''")
        path = out / f"play_{game}.png"
        page.screenshot(path=str(path))
        return path
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def report_page(browser, run_dir: str, out: pathlib.Path) -> list[pathlib.Path]:
    subprocess.run([sys.executable, "-m", "moozi.cli", "report", run_dir], check=True, stdout=subprocess.DEVNULL)
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(pathlib.Path(run_dir, "report", "report.html").resolve().as_uri())
    first, full = out / "report.png", out / "report_full.png"
    page.screenshot(path=str(first))
    page.screenshot(path=str(full), full_page=True)
    return [first, full]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--play", action="append", default=[], metavar="RUN")
    parser.add_argument("--report", default=None, metavar="RUN")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path(__file__).parent)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        raise SystemExit("no chromium: apt-get install chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        written = [play_page(browser, run, args.out) for run in args.play]
        if args.report:
            written += report_page(browser, args.report, args.out)
        browser.close()
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
