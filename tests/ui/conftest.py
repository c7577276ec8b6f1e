"""Fixtures for the review desk's end-to-end tests: one started ``pal serve`` and one headless
Debian Chromium per module (reused by every test of the module, a fresh profile each time).

The browser is driven through Selenium with Debian's ``/usr/bin/chromedriver`` named
explicitly, so selenium-manager never runs or downloads anything; ``make setup`` installs
``chromium`` and ``chromium-driver`` with apt-get when they are missing. The flags keep
Chromium from reaching any outside host (background networking, component updates, sync).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.wait import WebDriverWait

from tests.ui.world import World, build

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-dev-shm-usage", "--disable-extensions", "--disable-default-apps",
         "--window-size=1280,1000", "--force-device-scale-factor=1")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A started server with the organisation of :mod:`tests.ui.world`."""
    built = build(tmp_path_factory.mktemp("desk") / "data")
    try:
        yield built
    finally:
        built.server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One headless Chromium for the module."""
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.fail("the review desk's tests need Debian's chromium and chromium-driver: "
                    "run make setup (as root it installs them with apt-get)")
    profile = tempfile.mkdtemp(prefix="pal-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def navigates(driver: WebDriver, element: WebElement, key: str | None = None) -> None:
    """Click ``element`` (or press ``key`` on it) and wait for the next page to load."""
    driver.execute_script("window.__palOldPage = true;")
    if key is None:
        element.click()
    else:
        element.send_keys(key)
    WebDriverWait(driver, 15, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script(
            "return window.__palOldPage === undefined && document.readyState === 'complete'"))


def sign_in(driver: WebDriver, world: World, name: str) -> None:
    """Sign in on the desk as ``name`` through its form (clears any earlier session)."""
    driver.get(world.server.url + "/ui/sign-in")
    driver.delete_all_cookies()
    driver.get(world.server.url + "/ui/sign-in")
    field = driver.find_element(By.ID, "credential")
    field.send_keys(world.members[name].token)
    navigates(driver, driver.find_element(By.ID, "sign-in"))
    assert driver.current_url == world.server.url + "/ui/", driver.page_source[:2000]
    assert name in driver.find_element(By.ID, "signed-in-as").text


def requests_seen(driver: WebDriver) -> list[str]:
    """Every URL the browser requested since the last call (its performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def labelled_controls(driver: WebDriver) -> list[str]:
    """Form controls on the page that have no label (empty when every one has one)."""
    script = """
      return Array.from(document.querySelectorAll('input, select, textarea, button'))
        .filter(el => el.type !== 'hidden')
        .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                      && !(el.tagName === 'BUTTON' && el.textContent.trim()))
        .map(el => el.outerHTML.slice(0, 120));
    """
    result: list[str] = driver.execute_script(script)
    return result


def screenshot(driver: WebDriver, name: str) -> Path:
    """Save a PNG of the page: into ``$PAL_DESK_SCREENSHOTS`` (``make screenshots`` sets it
    to docs/review-desk/) or a temporary directory; returns the path."""
    folder = Path(os.environ.get("PAL_DESK_SCREENSHOTS") or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(700, min(int(height) + 40, 2400)))
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 1000)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000, path
    return path


def page_state(driver: WebDriver) -> dict[str, Any]:
    """What a hostile text would change if it ran or took shape on the page."""
    result: dict[str, Any] = driver.execute_script("""
      const bad = Array.from(document.querySelectorAll(
          'script, img, svg, iframe, object, embed, form:not([action^="/ui/"]), '
          + 'link:not([href^="/ui/static/"]), meta[http-equiv], style, base'));
      const handlers = Array.from(document.querySelectorAll('*')).filter(
          el => Array.from(el.attributes).some(a => a.name.toLowerCase().startsWith('on')));
      const links = Array.from(document.querySelectorAll('a[href]'))
          .map(a => a.getAttribute('href'))
          .filter(h => !(h.startsWith('/ui/') || h === '#content'));
      return {pwned: window.__pwned === undefined ? null : String(window.__pwned),
              elements: bad.map(e => e.outerHTML.slice(0, 80)),
              handlers: handlers.map(e => e.outerHTML.slice(0, 80)), links: links,
              wide: document.documentElement.scrollWidth > window.innerWidth + 1,
              text: document.body.innerText};
    """)
    return result
