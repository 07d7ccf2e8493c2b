#!/usr/bin/env python3
"""The operator console in a real browser (headless Chromium through Selenium).

Run by tests/e2e_console.rs (`the_console_page_in_a_browser`), which starts a gateway,
a node `lab`, a fake node whose tool description is hostile HTML, two `gsv call`s
waiting for approval, a background session and a token to revoke, then runs

    .venv/bin/python tests/console/browser.py CONFIG.json

CONFIG holds the one-time login link, what to look for, and where to save the
screenshots. The script logs in (the link's page asks, "Sign in" posts the code; the
link works only once), looks at
the nodes and the hostile node's tools, approves one waiting call and denies the
other, kills the background session, revokes the token, creates a token, and checks
on every page that hostile strings are shown as text: the literal text is visible,
no <img> or extra <script> element was created, and no alert fired. Every wait is
bounded (at most 20 s). Exit status 0 when everything held.
"""

import json
import os
import sys
import tempfile
import time

from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    StaleElementReferenceException,
    TimeoutException,
    UnexpectedAlertPresentException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

WAIT = 20


def browser():
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
    options.add_argument("--user-data-dir=" + tempfile.mkdtemp(prefix="gsv-console-chrome-"))
    options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(WAIT)
    driver.set_script_timeout(WAIT)
    return driver


def wait_for(driver, what, predicate, timeout=WAIT):
    """Polls predicate(driver) until it is truthy; fails with `what` after timeout."""
    try:
        return WebDriverWait(
            driver, timeout, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
        ).until(predicate)
    except TimeoutException:
        raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


def no_alert(driver):
    try:
        alert = driver.switch_to.alert
        text = alert.text
        alert.dismiss()
        raise AssertionError("an alert fired: %r" % text)
    except NoAlertPresentException:
        pass


def text_only(driver, where):
    """No element made from agent or node text: no <img>, no <script> but the app's."""
    no_alert(driver)
    images = driver.execute_script("return document.images.length")
    scripts = driver.execute_script(
        "return Array.from(document.scripts).map(s => s.getAttribute('src'))"
    )
    assert images == 0, "%s: %d <img> element(s) were created" % (where, images)
    assert scripts == ["/ui/app.js"], "%s: unexpected scripts %r" % (where, scripts)


def js_text(driver, css):
    """The visible text of the first element `css` finds ("" when none), read in one
    step in the page (an element a live update replaces cannot go stale here)."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", css
    )


def js_find(driver, css, inner, marker, attribute):
    """`attribute` (a data- name) of the first `css` element whose `inner` element's
    text contains `marker`, or None."""
    return driver.execute_script(
        "for (const e of document.querySelectorAll(arguments[0])) {"
        "  const i = e.querySelector(arguments[1]);"
        "  if (i && i.textContent.includes(arguments[2])) return e.dataset[arguments[3]] || null;"
        "} return null;",
        css,
        inner,
        marker,
        attribute,
    )


def click(driver, what, css):
    """Clicks the element `css` finds, again if a live update replaced it meanwhile."""
    deadline = time.time() + WAIT
    while time.time() < deadline:
        try:
            found = driver.find_elements(By.CSS_SELECTOR, css)
            if found:
                found[0].click()
                return
        except StaleElementReferenceException:
            pass
        time.sleep(0.1)
    raise AssertionError("timed out after %ss waiting to click %s" % (WAIT, what))


def shot(driver, config, name):
    path = os.path.join(config["screenshots"], name + ".png")
    driver.save_screenshot(path)


def sign_in(driver, link):
    """Opens a one-time login link and presses its "Sign in" button (the link itself
    signs no one in); waits for the app."""
    driver.get(link)
    wait_for(
        driver,
        "the sign-in page or the app",
        lambda d: d.find_elements(By.ID, "sign-in") or d.find_elements(By.ID, "whoami"),
    )
    if driver.find_elements(By.ID, "sign-in"):
        click(driver, "Sign in", "#sign-in")
    wait_for(driver, "the app after login", lambda d: d.find_elements(By.ID, "whoami") and js_text(d, "#whoami"))


def go(driver, config, page):
    driver.get(config["base"] + "/ui/#/" + page)


def main():
    with open(sys.argv[1]) as f:
        config = json.load(f)
    xss = config["xss"]
    driver = browser()
    try:
        # The one-time link signs in once.
        sign_in(driver, config["login"])
        wait_for(driver, "the nodes table", lambda d: d.find_elements(By.CSS_SELECTOR, "tr.node"))
        cookies = [c for c in driver.get_cookies() if c["name"].startswith("gsv_console")]
        assert len(cookies) == 1 and cookies[0]["httpOnly"], cookies
        assert len(cookies[0]["name"]) > len("gsv_console_") + 16, "a per-gateway name: %r" % cookies
        assert driver.execute_script("return document.cookie") == "", "the cookie is HttpOnly"

        # Nodes: both listed; the hostile node's tool shown as text.
        for node in (config["node"], config["xssNode"]):
            wait_for(
                driver,
                "node %s listed" % node,
                lambda d: d.find_elements(By.CSS_SELECTOR, 'tr.node[data-node="%s"]' % node),
            )
        text_only(driver, "nodes")
        shot(driver, config, "nodes")

        go(driver, config, "nodes/" + config["xssNode"])
        desc = wait_for(driver, "the hostile tool's description", lambda d: js_text(d, ".tool-desc"))
        assert xss in desc, "the description shows as text: %r" % desc
        text_only(driver, "node detail (hostile)")
        shot(driver, config, "node-hostile")

        go(driver, config, "nodes/" + config["node"])
        wait_for(driver, "the node's tools", lambda d: len(d.find_elements(By.CSS_SELECTOR, ".tool")) > 5)
        # The binaries its tools need, found or missing on the node's host.
        wait_for(driver, "the node's binary status", lambda d: js_text(d, ".bins").strip())
        click(driver, "Bash's input schema", '.tool[data-tool="Bash"] summary')
        wait_for(
            driver,
            "Bash's input schema",
            lambda d: '"command"' in js_text(d, '.tool[data-tool="Bash"] pre.schema'),
        )
        shot(driver, config, "node")

        # A second use of the same link is refused (the session stays).
        driver.get(config["login"])
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "refused" in body.lower(), body
        assert "already used" in body, body

        # Approvals: approve one waiting call, deny the other, in the page.
        go(driver, config, "approvals")
        wait_for(
            driver,
            "two pending approval requests",
            lambda d: len(d.find_elements(By.CSS_SELECTOR, ".approval")) >= 2 and d.find_elements(By.CSS_SELECTOR, ".approval"),
        )
        assert xss in js_text(driver, "#pending"), "the agent's command shows as text"
        countdown = js_text(driver, ".approval .countdown")
        assert ":" in countdown, countdown
        text_only(driver, "approvals")
        shot(driver, config, "approvals")

        def card_with(marker):
            return wait_for(
                driver,
                "the request for %s" % marker,
                lambda d: js_find(d, ".approval", ".summary", marker, "id"),
            )

        click(driver, "Approve", "#approval-%s button.approve" % card_with(config["approveMarker"]))
        wait_for(
            driver,
            "the approved request to leave the queue",
            lambda d: not any(config["approveMarker"] in c.text for c in d.find_elements(By.CSS_SELECTOR, ".approval")),
        )
        click(driver, "Deny", "#approval-%s button.deny" % card_with(config["denyMarker"]))
        wait_for(
            driver,
            "no request left",
            lambda d: not d.find_elements(By.CSS_SELECTOR, ".approval"),
        )
        wait_for(
            driver,
            "both decisions under Recent",
            lambda d: "approved" in js_text(d, "#recent-approvals")
            and "denied" in js_text(d, "#recent-approvals"),
        )
        text_only(driver, "approvals (decided)")

        # Sessions: the background session, its log, then killed from the page.
        go(driver, config, "sessions")

        def running(d):
            return js_find(d, 'tr.session[data-status="running"]', ".command", config["killMarker"], "session")

        session = wait_for(driver, "the background session", running)
        text_only(driver, "sessions")
        shot(driver, config, "sessions")
        click(driver, "Kill", 'tr.session[data-session="%s"] button.kill' % session)
        wait_for(driver, "the session to stop running", lambda d: running(d) is None)

        # Audit: rows, the chain verified, a filter.
        go(driver, config, "audit")
        wait_for(driver, "the chain's verification", lambda d: "chain verifies" in js_text(d, "#audit-verify"))
        wait_for(driver, "audit rows", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#audit tbody tr")) > 5)
        text_only(driver, "audit")
        shot(driver, config, "audit")
        driver.find_element(By.ID, "audit-q").send_keys("denied")
        wait_for(
            driver,
            "the filtered audit rows",
            lambda d: all("denied" in r.text.lower() for r in d.find_elements(By.CSS_SELECTOR, "#audit tbody tr"))
            and d.find_elements(By.CSS_SELECTOR, "#audit tbody tr"),
        )

        # Tokens: create one (shown once), revoke another in two clicks.
        go(driver, config, "tokens")
        wait_for(driver, "the token list", lambda d: d.find_elements(By.CSS_SELECTOR, "tr.token"))
        driver.find_element(By.ID, "tok-name").send_keys("made-in-the-page")
        driver.find_element(By.ID, "tok-allow").send_keys("*__Read, *__Glob")
        driver.find_element(By.CSS_SELECTOR, "#new-token button[type=submit]").click()
        secret = wait_for(driver, "the new token", lambda d: js_text(d, "#new-token-value"))
        assert secret.startswith("gsv_"), secret
        selector = 'tr.token[data-id="%s"]' % config["revokeId"]
        wait_for(driver, "the token to revoke", lambda d: d.find_elements(By.CSS_SELECTOR, selector))
        click(driver, "Revoke", selector + " button.revoke")
        click(driver, "Really revoke", selector + " button.revoke-confirm")
        wait_for(
            driver,
            "the token revoked",
            lambda d: d.execute_script(
                "const e = document.querySelector(arguments[0]); return e && e.dataset.state;", selector
            )
            == "revoked",
        )
        text_only(driver, "tokens")
        shot(driver, config, "tokens")

        # Jobs.
        go(driver, config, "jobs")
        wait_for(driver, "a job", lambda d: d.find_elements(By.CSS_SELECTOR, "tr.job"))
        text_only(driver, "jobs")
        shot(driver, config, "jobs")

        severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE" and "/ui/login" not in e.get("message", "")]
        assert not severe, "errors in the page's console: %r" % severe
        print("browser.py: ok")
        return 0
    except UnexpectedAlertPresentException as e:
        print("browser.py: an alert fired: %s" % e, file=sys.stderr)
        return 1
    except AssertionError as e:
        print("browser.py: FAILED: %s" % e, file=sys.stderr)
        try:
            shot(driver, config, "failure")
            print(driver.find_element(By.TAG_NAME, "body").text[:2000], file=sys.stderr)
        except Exception:  # noqa: BLE001 - best effort
            pass
        return 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
