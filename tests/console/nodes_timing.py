#!/usr/bin/env python3
"""How long the console's nodes page takes to draw, in headless Chromium.

Used by `gsv bench console` (bench/src/console.rs), which starts a gateway with a
simulated fleet and passes a one-time login link:

    .venv/bin/python tests/console/nodes_timing.py LOGIN_LINK ROUNDS

Each round is a fresh navigation to /ui/#/nodes; the figure is the page's own
`performance.now()` when the rows are in the DOM (`window.gsvTimings.nodesDrawn`,
set by app.js right after it appends them), i.e. milliseconds from the start of the
navigation: the HTML, the script, /ui/api/me, /ui/api/nodes and the drawing. The
first navigation (through the login link and its Sign in button) is not counted. Prints one JSON object:
{"rounds": [ms, ...], "rows": N, "total": N}.
"""

import json
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def main():
    link, rounds = sys.argv[1], int(sys.argv[2])
    base = link.split("/ui/")[0]
    options = webdriver.ChromeOptions()
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,900",
    ):
        options.add_argument(flag)
    options.add_argument("--user-data-dir=" + tempfile.mkdtemp(prefix="gsv-console-timing-"))
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(20)
    drawn = "return window.gsvTimings && window.gsvTimings.nodesDrawn ? [window.gsvTimings.nodesDrawn, window.gsvTimings.nodesRows, document.getElementById('nodes-count').textContent] : null"
    try:
        # The link's page asks; its "Sign in" button posts the code.
        driver.get(link)
        WebDriverWait(driver, 20, poll_frequency=0.02).until(lambda d: d.find_elements(By.ID, "sign-in"))
        driver.find_element(By.ID, "sign-in").click()
        WebDriverWait(driver, 20, poll_frequency=0.02).until(lambda d: d.execute_script(drawn))
        times = []
        rows = total = 0
        for i in range(rounds):
            driver.get("%s/ui/?round=%d#/nodes" % (base, i))
            ms, rows, count = WebDriverWait(driver, 20, poll_frequency=0.02).until(
                lambda d: d.execute_script(drawn)
            )
            times.append(round(ms, 1))
            total = int(count.split()[0])
        print(json.dumps({"rounds": times, "rows": rows, "total": total}))
        return 0
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
