#!/usr/bin/env python3
"""The console against a hostile page and hostile text, in a real browser.

Run by tests/e2e_console.rs with `.venv/bin/python tests/console/attack.py CONFIG.json`;
CONFIG's `part` picks what is checked:

- `another-port`: the admin signs in; then a page served on another loopback port
  (CONFIG `attacker`, the same site for the browser: cookies are not kept apart by
  port) fires GETs at the console's API from <img>, <script>, fetch(no-cors,
  credentials: include) and EventSource, submits forms, and plants `gsv_console...`
  cookies with more specific paths. Afterwards the admin's console still works as the
  admin. Then the browser is sent to the login link of an attacker's viewer session
  (CONFIG `viewerLogin`): it asks before signing in, and without the click the admin
  is still the admin. That no call was made and no audit row written is checked by
  the Rust test around this script.
- `hidden`: approvals whose command, transfer source name and a 200 000-character
  argument (CONFIG `bigChars`) the agent chose: bidi controls are shown escaped and
  marked (`\\u{202e}`, in a `.esc` element), never drawn; the long value shows its head,
  an "…(+N more characters)" marker with the right count, and "show all" reveals all.

Every wait is bounded (at most 20 s); the browser reaches loopback only. Exit status 0
when everything held.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from browser import browser, click, js_text, shot, sign_in, wait_for  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

RAW = ["\u202e", "\u2066", "\u2069", "\u202d", "\u200f"]


def planted(driver):
    """The console cookies a script planted (the session's own is HttpOnly)."""
    return [
        (c["name"], c["path"])
        for c in driver.execute_cdp_cmd("Network.getAllCookies", {})["cookies"]
        if c["name"].startswith("gsv_console") and not c.get("httpOnly")
    ]


def whoami(driver):
    return js_text(driver, "#whoami")


def another_port(driver, config):
    sign_in(driver, config["login"])
    wait_for(driver, "the admin's console", lambda d: whoami(d).startswith("admin"))
    wait_for(driver, "the nodes table", lambda d: d.find_elements(By.CSS_SELECTOR, "tr.node"))

    # The hostile page on another port: it reports when its requests are answered.
    driver.get(config["attacker"])
    wait_for(
        driver,
        "the attacker's requests to finish",
        lambda d: d.execute_script("return window.attackDone === true"),
    )
    fired = driver.execute_script("return window.attackFired")
    assert fired >= 200, "the attacker fired %r requests" % fired
    assert ("gsv_console", "/ui/api") in planted(driver), "the attacker planted its cookies: %r" % planted(driver)
    # Give late requests (scripts, the event stream) time to reach the gateway.
    time.sleep(2)
    shot(driver, config, "attacker")

    # Back in the console: still the admin's session, and it works.
    driver.get(config["base"] + "/ui/#/approvals")
    wait_for(driver, "the admin's console after the attack", lambda d: whoami(d).startswith("admin"))
    wait_for(driver, "the approvals page", lambda d: d.find_elements(By.CSS_SELECTOR, "#pending p, #pending .approval"))
    me = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "api('me').then((m) => done(m.role), (e) => done('error ' + e.code + ' ' + e.message));"
    )
    assert me == "admin", "the page's own request after the attack: %r" % me
    assert planted(driver) == [], "the gateway cleared the planted cookies: %r" % planted(driver)

    # The attacker's viewer login link: a page that asks; no click, no session change.
    driver.get(config["viewerLogin"])
    wait_for(driver, "the sign-in page", lambda d: d.find_elements(By.ID, "sign-in"))
    body = driver.find_element(By.TAG_NAME, "body").text
    assert "viewer" in body, "the page says whose session it would open: %r" % body
    shot(driver, config, "login-page")
    driver.get(config["base"] + "/ui/")
    wait_for(driver, "the console after the viewer link", lambda d: whoami(d))
    assert whoami(driver).startswith("admin"), "still the admin: %r" % whoami(driver)
    shot(driver, config, "after-attack")


def card_with(driver, marker):
    """The id of the pending approval card whose text contains `marker`."""
    return wait_for(
        driver,
        "the request showing %r" % marker,
        lambda d: d.execute_script(
            "for (const c of document.querySelectorAll('.approval')) {"
            "  if (c.innerText.includes(arguments[0])) return c.dataset.id;"
            "} return null;",
            marker,
        ),
    )


def escaped(driver, css, what, marked=True):
    """`css`'s text shows \\u{202e} as an escape and no raw bidi control, and marks it
    (`marked`). A value the gateway quoted into its own sentence arrives escaped by the
    gateway (summary::quoted), so the page has no raw character left to mark there."""
    text = wait_for(driver, what, lambda d: js_text(d, css))
    assert "\\u{202e}" in text, "%s: the escape is shown: %r" % (what, text[:400])
    for raw in RAW:
        assert raw not in text, "%s: a raw %r is drawn: %r" % (what, raw, text[:400])
    marks = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' .esc')).map((e) => e.textContent);", css
    )
    if marked:
        assert "\\u{202e}" in marks, "%s: the escape is marked: %r" % (what, marks)


def hidden(driver, config):
    sign_in(driver, config["login"])
    driver.get(config["base"] + "/ui/#/approvals")
    wait_for(
        driver,
        "three pending approval requests",
        lambda d: len(d.find_elements(By.CSS_SELECTOR, ".approval")) >= 3,
    )

    bash = card_with(driver, config["bashMarker"])
    escaped(driver, "#approval-%s .summary" % bash, "the Bash summary")
    escaped(driver, "#approval-%s .args" % bash, "the Bash arguments")
    driver.execute_script("document.getElementById('approval-' + arguments[0]).scrollIntoView()", bash)
    shot(driver, config, "hidden-bidi")

    put = card_with(driver, config["putMarker"])
    escaped(driver, "#approval-%s .summary" % put, "the put's summary", marked=False)
    escaped(driver, "#approval-%s .args" % put, "the put's arguments", marked=False)

    big = card_with(driver, config["bigMarker"])
    args = "#approval-%s .args" % big
    text = wait_for(driver, "the long argument", lambda d: "more characters" in js_text(d, args) and js_text(d, args))
    expected = "…(+%d more characters)" % (config["bigChars"] - config["argMax"])
    assert expected in text, "the marker counts what is left out (%r): %r" % (expected, text[-300:])
    assert config["bigMarker"] in text, "the head is shown"
    assert config["bigEnd"] not in text, "the tail is not shown before show all"
    shot(driver, config, "hidden")
    click(driver, "show all", args + " button.show-all")
    full = wait_for(driver, "the whole value", lambda d: config["bigEnd"] in js_text(d, args) and js_text(d, args))
    assert len(full) >= config["bigChars"], "all of it: %d characters" % len(full)
    assert "more characters" not in full, "no marker once shown whole"

    page = driver.execute_script("return document.body.innerText")
    for raw in RAW:
        assert raw not in page, "a raw %r is drawn somewhere on the page" % raw

    # Deny the Bash call: it would have run `touch`.
    click(driver, "Deny", "#approval-%s button.deny" % bash)
    wait_for(
        driver,
        "the Bash request to leave the queue",
        lambda d: not d.find_elements(By.CSS_SELECTOR, "#approval-%s" % bash),
    )


def main():
    with open(sys.argv[1]) as f:
        config = json.load(f)
    driver = browser()
    try:
        {"another-port": another_port, "hidden": hidden}[config["part"]](driver, config)
        print("attack.py %s: ok" % config["part"])
        return 0
    except AssertionError as e:
        print("attack.py %s: FAILED: %s" % (config["part"], e), file=sys.stderr)
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
