"""The review desk end to end in headless Chromium against a started ``pal serve``: sign in,
walk the tree, open a record and its diff, review and merge a proposal as a second person,
self-review refused, reject with a reason, the merged record in shared memory and in the prime
preview, grants, sign out — each page usable by keyboard with labelled controls."""

from __future__ import annotations

import httpx
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from tests.api.server import ok
from tests.ui.conftest import labelled_controls, navigates, page_state, screenshot, sign_in
from tests.ui.world import World


def _text(driver: WebDriver, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def _no_dialog(driver: WebDriver) -> None:
    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return
    raise AssertionError(f"a dialog opened: {alert.text!r}")


def _usable(driver: WebDriver) -> None:
    """Every control labelled, nothing ran, nothing off the desk."""
    assert labelled_controls(driver) == []
    state = page_state(driver)
    assert state["pwned"] is None and state["handlers"] == [] and state["links"] == []
    _no_dialog(driver)


def test_sign_in_walk_the_tree_and_read_a_record(browser: WebDriver, world: World) -> None:
    sign_in(browser, world, "alice")
    _usable(browser)
    roots = browser.find_element(By.ID, "roots")
    assert "Company" in roots.text and "Acme" not in roots.text  # one level at a time
    screenshot(browser, "tree")
    navigates(browser, browser.find_element(By.LINK_TEXT, "Company"))
    assert _text(browser, "memory-name") == "Company"
    children = browser.find_element(By.ID, "children").text
    assert "Acme" in children and "Board" in children
    assert "restricted" in children  # the Board branch is marked
    _usable(browser)
    navigates(browser, browser.find_element(By.LINK_TEXT, "Acme"))
    assert _text(browser, "memory-name") == "Acme"
    assert _text(browser, "record-count") == "3"  # the fact, the standing procedure, the note
    assert _text(browser, "open-count") == "3"  # bob's, erin's and alice's proposals
    screenshot(browser, "memory")
    navigates(browser, browser.find_element(By.ID, "up"))  # walk up again
    assert _text(browser, "memory-name") == "Company"
    browser.get(f"{world.server.url}/ui/memories/{world.ids['acme']}/records")
    _usable(browser)
    screenshot(browser, "records")
    navigates(browser, browser.find_element(By.LINK_TEXT, "Acme renews in March"))
    assert "member:" + world.members["alice"].id in _text(browser, "written-by")
    assert "(human)" in _text(browser, "written-by")
    history = browser.find_element(By.ID, "history").text
    assert "superseded" in history and "active" in history
    diff = browser.find_element(By.ID, "diff")
    removed = [e.text for e in diff.find_elements(By.TAG_NAME, "del")]
    added = [e.text for e in diff.find_elements(By.TAG_NAME, "ins")]
    assert [w.strip() for w in removed] == ["30"] and [w.strip() for w in added] == ["60"]
    _usable(browser)
    screenshot(browser, "record-diff")


def test_file_parts_are_downloads_never_rendered(browser: WebDriver, world: World) -> None:
    sign_in(browser, world, "alice")
    browser.get(f"{world.server.url}/ui/memories/{world.ids['acme']}/records/{world.ids['note']}")
    link = browser.find_element(By.CSS_SELECTOR, "a.download")
    assert link.get_attribute("download") is not None
    assert "q3 <figures>.html" in browser.find_element(By.CSS_SELECTOR, "p.file").text
    href = link.get_attribute("href")
    assert href and href.endswith("/content/1")
    # The bytes (an HTML page with a script) come back as an attachment that cannot render.
    cookie = browser.get_cookie("pal_desk")
    assert cookie is not None
    response = httpx.get(href, cookies={"pal_desk": cookie["value"]})
    assert response.status_code == 200
    assert response.content == b"<script>alert('file')</script><h1>Q3</h1>"
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"].startswith("attachment;")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in response.headers["content-security-policy"]
    _no_dialog(browser)


def test_recall_shows_served_and_degraded_signals(browser: WebDriver, world: World) -> None:
    sign_in(browser, world, "alice")
    browser.get(f"{world.server.url}/ui/memories/{world.ids['company']}/records")
    box = browser.find_element(By.ID, "q")
    box.send_keys("notice period renews")
    navigates(browser, box, Keys.ENTER)
    assert "text" in _text(browser, "served") and "filters" in _text(browser, "served")
    assert _text(browser, "matched") == "text"
    assert "nothing" in _text(browser, "degraded")
    assert "Acme renews in March" in _text(browser, "records")  # found below, named by memory
    assert "Acme" in _text(browser, "records")
    _usable(browser)


def test_a_second_person_reviews_and_merges(browser: WebDriver, world: World) -> None:
    acme = world.ids["acme"]
    proposal = world.ids["bob_proposal"]
    sign_in(browser, world, "carol")
    assert int(_text(browser, "queue-count")) == 3
    navigates(browser, browser.find_element(By.ID, "queue-link"))
    _usable(browser)
    screenshot(browser, "queue")
    navigates(browser, browser.find_element(By.LINK_TEXT, "Acme's notice period"))
    assert proposal in browser.current_url
    bob = world.members["bob"].id
    assert _text(browser, "source-ref") == f"refs/agents/{bob}/main"
    assert f"member:{bob} (agent)" in _text(browser, "originator")
    assert _text(browser, "staleness").startswith(("up to date", "stale"))
    assert len(_text(browser, "target-head")) == 64
    # The existing "Acme renews in March" fact shares its words: a near-duplicate.
    assert "Acme renews in March" in _text(browser, "duplicates")
    changes = browser.find_element(By.CSS_SELECTOR, "table.op")
    assert "add_memory" in changes.text and "content" in changes.text
    assert "notice period is 60 days" in changes.text
    assert "Awaiting" in _text(browser, "independence")
    _usable(browser)
    screenshot(browser, "proposal")
    # Before the merge, the prime preview shows the memory only "after".
    browser.get(f"{world.server.url}/ui/memories/{acme}/prime?budget=4000&proposal={proposal}")
    assert "notice period is 60 days" not in _text(browser, "prime-now")
    assert "notice period is 60 days" in _text(browser, "prime-after")
    assert "Answer Acme's support questions" in _text(browser, "prime-now")  # standing
    _usable(browser)
    screenshot(browser, "prime-preview")
    # Approve with a reason, by keyboard: the verdict radio, the reason, then submit.
    browser.get(f"{world.server.url}/ui/proposals/{proposal}")
    browser.find_element(By.ID, "verdict-approve").send_keys(Keys.SPACE)
    reason = browser.find_element(By.ID, "reason")
    reason.send_keys("Matches the signed contract we hold.")
    navigates(browser, browser.find_element(By.ID, "submit-review"), Keys.ENTER)
    assert _text(browser, "done") == "Your approval is recorded."
    assert _text(browser, "proposal-status") == "approved"
    assert f"member:{world.members['carol'].id} (human)" in _text(browser, "independence")
    assert "Independent review" in _text(browser, "independence")
    assert "Matches the signed contract" in _text(browser, "reviews")
    navigates(browser, browser.find_element(By.ID, "merge"))
    assert _text(browser, "done").startswith("Merged")
    assert _text(browser, "proposal-status") == "merged"
    # The merged memory is accepted: in shared memory's records and in the prime preview.
    browser.get(f"{world.server.url}/ui/memories/{acme}/records")
    assert "Acme's notice period" in _text(browser, "records")
    bob_writer = f"member:{world.members['bob'].id}"
    browser.get(f"{world.server.url}/ui/memories/{acme}/records?writer={bob_writer}")
    rows = browser.find_elements(By.CSS_SELECTOR, "#records tbody tr")
    assert len(rows) == 1 and "Acme's notice period" in rows[0].text and "(agent)" in rows[0].text
    browser.get(f"{world.server.url}/ui/memories/{acme}/records?type=procedure")
    assert [r.text.split("\n")[0] for r in browser.find_elements(
        By.CSS_SELECTOR, "#records tbody td.title")] == ["Answer Acme within a day"]
    browser.get(f"{world.server.url}/ui/memories/{acme}/prime?budget=4000")
    assert "notice period is 60 days" in _text(browser, "prime-now")
    browser.get(f"{world.server.url}/ui/memories/{acme}/prime?budget=10")  # a tight budget
    assert "Nothing fits" in _text(browser, "prime-now")
    assert "notice period is 60 days" not in _text(browser, "prime-now")
    with world.api("carol") as api:
        shared = ok(api.get(f"/api/memory/{acme}/refs/shared/main"))
        done = ok(api.get(f"/api/memory/proposals/{proposal}"))
    assert done["status"] == "merged" and done["merged_changeset_id"] == shared[
        "head_changeset_id"]


def test_self_review_is_refused_in_the_apis_words(browser: WebDriver, world: World) -> None:
    proposal = world.ids["alice_proposal"]
    with world.api("alice") as api:
        refused = api.post(f"/api/memory/proposals/{proposal}/reviews",
                           json={"verdict": "approve", "comment": "mine"})
    assert refused.status_code == 403
    words = refused.json()["message"]
    sign_in(browser, world, "alice")
    browser.get(f"{world.server.url}/ui/proposals/{proposal}")
    assert "that is you" in _text(browser, "originator")
    browser.find_element(By.ID, "verdict-approve").click()
    browser.find_element(By.ID, "reason").send_keys("I checked my own work.")
    navigates(browser, browser.find_element(By.ID, "submit-review"))
    assert _text(browser, "problem") == words
    assert words == "the originator of a proposal cannot review it; ask another member to review"
    assert _text(browser, "proposal-status") == "open"
    _usable(browser)
    screenshot(browser, "self-review-refused")
    # Approved by someone else, it still cannot be merged by its author: the API's words again.
    with world.api("carol") as api:
        ok(api.post(f"/api/memory/proposals/{proposal}/reviews",
                    json={"verdict": "approve", "comment": "fine by me"}), 201)
    with world.api("alice") as api:
        refused = api.post(f"/api/memory/proposals/{proposal}/authorize", json={})
    assert refused.status_code == 403
    browser.get(f"{world.server.url}/ui/proposals/{proposal}")
    navigates(browser, browser.find_element(By.ID, "merge"))
    assert _text(browser, "problem") == refused.json()["message"]
    assert _text(browser, "problem").startswith("the originator of a proposal cannot merge it")
    assert _text(browser, "proposal-status") == "approved"
    # The originator may cancel it.
    navigates(browser, browser.find_element(By.ID, "cancel"))
    assert _text(browser, "done") == "The proposal is canceled."
    assert _text(browser, "proposal-status") == "canceled"


def test_reject_needs_a_reason_and_is_terminal(browser: WebDriver, world: World) -> None:
    proposal = world.ids["erin_proposal"]
    sign_in(browser, world, "carol")
    browser.get(f"{world.server.url}/ui/proposals/{proposal}")
    state = page_state(browser)
    assert state["pwned"] is None and "<script>" in _text(browser, "proposal-title")
    browser.find_element(By.ID, "verdict-reject").click()
    browser.find_element(By.ID, "submit-review").click()  # no reason: the browser holds it
    assert browser.find_element(By.ID, "reason").get_attribute("validationMessage")
    assert _text(browser, "proposal-status") == "open"
    browser.find_element(By.ID, "reason").send_keys("Not a fact: a demand, and it carries markup.")
    navigates(browser, browser.find_element(By.ID, "submit-review"))
    assert _text(browser, "done") == "Your rejection is recorded."
    assert _text(browser, "proposal-status") == "rejected"
    assert "Review blocked: reject" in _text(browser, "independence")
    assert "Not a fact" in _text(browser, "reviews")
    assert browser.find_elements(By.ID, "review-form") == []  # terminal: nothing to decide
    _no_dialog(browser)


def test_grants_for_holders_of_delete(browser: WebDriver, world: World) -> None:
    sign_in(browser, world, "alice")
    browser.get(f"{world.server.url}/ui/memories/{world.ids['acme']}/grants")
    table = _text(browser, "grants")
    assert f"member:{world.members['carol'].id}" in table and "inherited" in table
    assert "No cutoff" in _text(browser, "cutoff")
    _usable(browser)
    screenshot(browser, "grants")
    browser.get(f"{world.server.url}/ui/memories/{world.ids['board']}/grants")
    assert "Board is restricted" in _text(browser, "cutoff")
    assert "direct" in _text(browser, "grants")
    # carol reads Board but holds no delete: no grants link, and the page is refused.
    sign_in(browser, world, "carol")
    browser.get(f"{world.server.url}/ui/memories/{world.ids['board']}")
    assert browser.find_elements(By.LINK_TEXT, "Grants") == []
    browser.get(f"{world.server.url}/ui/memories/{world.ids['board']}/grants")
    assert "delete privilege" in _text(browser, "problem")


def test_sign_out_ends_the_session(browser: WebDriver, world: World) -> None:
    sign_in(browser, world, "carol")
    cookie = browser.get_cookie("pal_desk")
    assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/ui" and not cookie["secure"]  # plain HTTP on loopback
    navigates(browser, browser.find_element(By.ID, "sign-out"), Keys.ENTER)
    assert browser.current_url.startswith(world.server.url + "/ui/sign-in")
    assert "signed out" in browser.page_source
    browser.get(world.server.url + "/ui/queue")
    assert browser.current_url.startswith(world.server.url + "/ui/sign-in")
    # The old cookie is dead on the server, not just forgotten by the browser.
    again = httpx.get(world.server.url + "/ui/queue", cookies={"pal_desk": cookie["value"]})
    assert again.status_code == 303 and "/ui/sign-in" in again.headers["location"]
    _usable(browser)
    screenshot(browser, "sign-in")


def test_a_wrong_credential_is_refused(browser: WebDriver, world: World) -> None:
    browser.delete_all_cookies()
    browser.get(world.server.url + "/ui/sign-in")
    browser.find_element(By.ID, "credential").send_keys("pal_hcred_not-a-real-one")
    navigates(browser, browser.find_element(By.ID, "sign-in"))
    assert _text(browser, "problem") == "the credential is unknown or revoked"
    assert browser.get_cookie("pal_desk") is None


def test_keyboard_alone_signs_in_and_reaches_the_content(browser: WebDriver,
                                                         world: World) -> None:
    browser.delete_all_cookies()
    browser.get(world.server.url + "/ui/sign-in")

    def focused() -> str:
        return str(browser.execute_script(
            "const e = document.activeElement; return e.id || e.textContent.trim();"))

    keys = ActionChains(browser)
    keys.send_keys(Keys.TAB).perform()
    assert focused() == "Skip to content"
    seen = []
    for _ in range(6):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        seen.append(focused())
        if seen[-1] == "credential":
            break
    assert seen[-1] == "credential", seen
    ActionChains(browser).send_keys(world.members["carol"].token).perform()
    page = browser.find_element(By.ID, "credential")
    navigates(browser, page, Keys.ENTER)
    assert "carol" in _text(browser, "signed-in-as")
    order = []
    for _ in range(8):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        order.append(focused())
    assert "Review queue" in order and "sign-out" in order  # nav and sign-out by Tab
