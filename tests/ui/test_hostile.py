"""Hostile author text (tests/adversarial/ui) renders inert and readable in a real browser:
no dialog, no script, no element made from text, no link off the desk, no request to another
origin, no navigation, and the 60 KB line wraps instead of widening the page."""

from __future__ import annotations

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from palimpsest.text import safe_line, safe_text
from tests.ui.conftest import page_state, requests_seen, screenshot, sign_in
from tests.ui.world import World, hostile_cases

CASES = sorted(hostile_cases())


def _inert(driver: WebDriver, world: World, url: str) -> str:
    """Open ``url`` and assert nothing in it acted; returns the page's visible text."""
    requests_seen(driver)  # drop what earlier pages asked for
    driver.get(url)
    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        pass
    else:
        raise AssertionError(f"a dialog opened: {alert.text!r}")
    assert driver.current_url == url  # no refresh, no redirect, no navigation
    state = page_state(driver)
    assert state["pwned"] is None, state["pwned"]
    assert state["elements"] == [] and state["handlers"] == [] and state["links"] == []
    assert not state["wide"], "a line pushed the page wider than the window"
    seen = requests_seen(driver)
    assert url in seen  # the network log is on
    foreign = [u for u in seen if not u.startswith(world.server.url + "/")]
    assert foreign == [], foreign
    text: str = state["text"]
    return text


@pytest.mark.parametrize("case", CASES)
def test_hostile_record_is_inert_and_readable(browser: WebDriver, world: World,
                                              case: str) -> None:
    sign_in(browser, world, "alice")
    doc = hostile_cases()[case]
    rid = world.ids[f"hostile:{case}"]
    text = _inert(browser, world,
                  f"{world.server.url}/ui/memories/{world.ids['hostile']}/records/{rid}")
    shown = browser.find_element(By.CSS_SELECTOR, "pre.text").text
    # Exactly the stored text, with controls and invisible characters made visible as the CLI
    # shows them (the browser's innerText turns a lone CR into a line break).
    assert shown == safe_text(doc["text"]).replace("\r", "\n")
    assert safe_line(doc["title"][:300]) in text.replace("\n", "")
    if case == "bidi-overrides":
        assert "<U+202E>" in shown and "<U+2066>" in shown and "<U+200B>" in shown
        assert "\u202e" not in text
    if case == "long-line":
        screenshot(browser, "hostile-long-line")


def test_hostile_lists_tree_and_proposal_are_inert(browser: WebDriver, world: World) -> None:
    sign_in(browser, world, "alice")
    url = world.server.url
    listing = _inert(browser, world, f"{url}/ui/memories/{world.ids['hostile']}/records")
    assert "<script>window.__pwned='script-title';alert('title')</script>" in listing
    screenshot(browser, "hostile-records")
    tree = _inert(browser, world, f"{url}/ui/memories/{world.ids['company']}")
    assert "Hostile <script>window.__pwned='name'</script>" in tree
    assert "<U+202E>evil<U+202C>" in tree
    recall = _inert(browser, world,
                    f"{url}/ui/memories/{world.ids['hostile']}/records?q=script+pwned")
    assert "__pwned" in recall
    proposal = _inert(browser, world, f"{url}/ui/proposals/{world.ids['erin_proposal']}")
    assert "Acme wants everything free. before <script>" in proposal
    prime = _inert(browser, world, f"{url}/ui/memories/{world.ids['acme']}/prime"
                                   f"?proposal={world.ids['erin_proposal']}")
    # In the prime block every record is one line of canonical JSON (``<`` spelled \u003c, so
    # the fence cannot be closed from inside); the page shows that text as text.
    assert "\\u003cscript\\u003ewindow.__pwned='script'" in prime
