"""Drive Open WebUI 0.12.4 in headless Chromium the way its admin and its users do: through its
screens, with the labels README.md "Open WebUI" names.

Run with the Python of Open WebUI's test environment (it has Playwright; the browser is Debian's
Chromium, no browser download): ``python owui_browser.py '<json>'`` where the JSON object has
``base`` (Open WebUI's URL), ``token`` (the user's session token, or none to sign up), ``action``
and the action's fields; prints one JSON object (the last line). Every request to a host other
than 127.0.0.1 is aborted (the test never reaches the network). Screenshots go to ``shots``
(a folder), named by the action's ``name``.

Actions:

``signup``
    Open WebUI's first page → « Get started » → name, e-mail, password → « Create Admin
    Account » (the first account is the admin). Returns ``{"token"}``.
``connect``
    README step 2: the menu under the user's name → Settings → Admin · Connections → « + » on
    « Manage OpenAI API Connections » → URL, Bearer key, « Advanced » → Headers → Save; then the
    default ``https://api.openai.com/v1`` connection's gear → Delete → « Confirm your action »
    Delete; Save. Returns the connections shown.
``model``
    README step 3: Settings → Admin · Models → ``ancre`` → Access → Public; Capabilities: the
    ones in ``off`` switched off (``None``: no longer shown — File Context goes with File
    Upload); Save & Update. Returns ``{"public", "on": {capability: switched on?}}``.
``task_model``
    README step 4: Settings → Admin · Interface; returns the Task Model selections shown.
``ask``
    A new chat (or the chat ``chat_id``), optionally a file attached (« More » → « Upload
    Files »), the ``question`` typed and sent with Enter; waits for the answer (or clicks « Stop »
    once ``stop_after_chars`` characters have arrived); with ``regenerate`` (« Try Again », « More
    Concise »…) uses the Regenerate menu of the last answer instead of asking; with
    ``open_source``, opens the answer's source list and the n-th source's panel; then reloads
    the page and reads the answer again. Returns ``{"chat_id", "answer", "panel", "reloaded"}``
    where an answer is ``{"text", "inline": [names of the inline citation buttons], "chips":
    "N Sources", "sources": [names in the list], "table", "table_headers": [the header cells of
    each table], "ordered_lists", "html"}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
ANSWER = "#response-content-container"


def _page(browser: Any, base: str, token: str | None) -> Page:
    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    page.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname in ("127.0.0.1", None)
               else route.abort())
    if token:
        page.add_init_script(f"window.localStorage.setItem('token', {json.dumps(token)});")
    page.set_default_timeout(30_000)
    return page


def _home(page: Page, url: str) -> None:
    page.goto(url, wait_until="domcontentloaded")
    page.locator("#chat-input").wait_for(timeout=60_000)
    page.wait_for_timeout(1500)
    okay = page.get_by_text("Okay, Let's Go!")  # the release notes, once per account
    if okay.count():
        okay.first.click()
        page.wait_for_timeout(300)


def _settings(page: Page, base: str, section: str) -> None:
    """The menu under the user's name → Settings → the *Admin* ``section``."""
    _home(page, base + "/")
    page.get_by_role("button", name="User menu").first.click()
    page.get_by_text("Settings", exact=True).click()
    page.get_by_text("Admin", exact=True).wait_for()
    # the Admin entries come after the personal ones (both have « Interface », « Audio »)
    page.locator("button", has_text=section).last.click()
    page.wait_for_timeout(1500)


def _shot(spec: dict[str, Any], page: Page, name: str) -> None:
    shots = Path(spec.get("shots") or "/tmp")
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{spec.get('name', spec['action'])}-{name}.png"), full_page=True)


def signup(page: Page, spec: dict[str, Any]) -> dict[str, Any]:
    page.goto(spec["base"] + "/", wait_until="domcontentloaded")
    page.get_by_text("Get started").click()
    page.get_by_placeholder("Enter Your Full Name").fill(spec["full_name"])
    page.get_by_placeholder("Enter Your Email").fill(spec["email"])
    page.get_by_placeholder("Enter Your Password").fill(spec["password"])
    page.get_by_role("button", name="Create Admin Account").click()
    page.locator("#chat-input").wait_for(timeout=60_000)
    _shot(spec, page, "signed-up")
    return {"token": page.evaluate("() => localStorage.token")}


def connect(page: Page, spec: dict[str, Any]) -> dict[str, Any]:
    base = spec["base"]
    _settings(page, base, "Connections")
    _shot(spec, page, "1-connections-before")
    page.get_by_text("Manage OpenAI API Connections").wait_for()
    page.get_by_role("button", name="Add Connection").first.click()
    dialog = page.locator("[role=dialog]").last
    dialog.get_by_text("Add Connection").wait_for()
    dialog.get_by_placeholder("API Base URL").fill(spec["url"])
    dialog.get_by_placeholder("API Key").fill(spec["key"])
    dialog.get_by_role("button", name="Advanced").click()
    dialog.get_by_placeholder("Enter additional headers in JSON format").fill(spec["headers"])
    _shot(spec, page, "2-add-connection")
    dialog.get_by_role("button", name="Save", exact=True).click()
    page.get_by_text("Add Connection", exact=True).wait_for(state="hidden")
    removed = False
    default = _connection(page, "https://api.openai.com/v1")
    if default is not None:
        default.locator("xpath=ancestor::div[.//button[@aria-label='Configure']][1]").get_by_role(
            "button", name="Configure").click()
        edit = page.locator("[role=dialog]", has_text="Edit Connection").last
        edit.get_by_text("Edit Connection").wait_for()
        _shot(spec, page, "3-default-connection")
        edit.get_by_role("button", name="Delete", exact=True).click()
        confirm = page.locator("[role=dialog]", has_text="Confirm your action").last
        confirm.get_by_text("Are you sure you want to delete this connection?").wait_for()
        _shot(spec, page, "3b-confirm")
        confirm.get_by_role("button", name="Delete", exact=True).click()
        page.get_by_text("Edit Connection", exact=True).wait_for(state="hidden")
        removed = _connection(page, "https://api.openai.com/v1") is None
    page.get_by_role("button", name="Save", exact=True).last.click()
    page.wait_for_timeout(1500)
    _shot(spec, page, "4-connections-after")
    inputs = page.locator("[role=dialog]").last.locator("input")
    urls = [v for v in (inputs.nth(i).input_value() for i in range(inputs.count())) if v.startswith("http")]
    return {"removed_default": removed, "connections": urls}


def _connection(page: Page, url: str) -> Any:
    """The URL field of the connection ``url`` on the Connections screen (the rows are inputs), or ``None``."""
    inputs = page.locator("[role=dialog]").last.locator("input")
    for i in range(inputs.count()):
        if inputs.nth(i).input_value() == url:
            return inputs.nth(i)
    return None


def model(page: Page, spec: dict[str, Any]) -> dict[str, Any]:
    _settings(page, spec["base"], "Models")
    page.locator("#model-list").get_by_text(spec.get("model", "ancre"), exact=True).first.click(force=True)
    page.get_by_text("Capabilities", exact=True).wait_for()
    page.get_by_text("Access", exact=True).last.click()
    access = page.locator("[role=dialog]", has_text="Access Control").last
    access.get_by_text("Visibility").wait_for()
    if access.get_by_text("Private", exact=True).count():  # a model nobody has been given yet
        access.get_by_text("Private", exact=True).first.click()
        page.get_by_role("menuitem", name="Public").or_(page.get_by_text("Public", exact=True)).last.click()
        access.get_by_text("Accessible to all users").wait_for()
    _shot(spec, page, "1-access")
    public = access.get_by_text("Accessible to all users").count() > 0
    access.locator("button").first.click()  # its ×
    access.wait_for(state="hidden")
    page.get_by_text("Capabilities", exact=True).click()
    states: dict[str, bool | None] = {}
    for cap in spec.get("off", []):
        label = page.get_by_text(cap, exact=True)
        if not label.count():  # File Context is only shown while File Upload is on
            states[cap] = None
            continue
        switch = label.last.locator("xpath=following::button[@role='switch'][1]")
        if switch.get_attribute("aria-checked") == "true":
            switch.click()
            page.wait_for_timeout(300)
        states[cap] = switch.get_attribute("aria-checked") == "true"
    states.update({cap: None for cap in spec.get("off", []) if not page.get_by_text(cap, exact=True).count()})
    _shot(spec, page, "2-capabilities")
    save = page.get_by_role("button", name="Save & Update")
    if save.is_enabled():  # disabled when nothing changed
        save.click()
        page.wait_for_timeout(1500)
    return {"public": public, "on": states}


def task_model(page: Page, spec: dict[str, Any]) -> dict[str, Any]:
    _settings(page, spec["base"], "Interface")
    page.get_by_text("Task Model", exact=True).wait_for()
    _shot(spec, page, "interface")
    text = page.locator("[role=dialog]").last.inner_text()
    return {"text": text}


READ_ANSWER = r"""el => {
    const box = el.closest('[id^="message-"]') || el.parentElement;
    const chip = box.querySelector('button[aria-label^="Toggle"]');
    return {
        text: el.innerText,
        html: el.innerHTML,
        inline: [...el.querySelectorAll('button[aria-label^="View source: "]:not([id^="source-"])')]
            .map(b => b.getAttribute('aria-label').slice('View source: '.length)),
        chips: chip ? chip.innerText.trim() : null,
        sources: [...box.querySelectorAll('button[id^="source-"]')]
            .map(b => b.innerText.trim().replace(/^\d+\s*/, '')),
        table: !!el.querySelector('table'),
        table_headers: [...el.querySelectorAll('table')]
            .map(t => [...t.querySelectorAll('th')].map(th => th.innerText.trim())),
        ordered_lists: el.querySelectorAll('ol').length,
    };
}"""


def _last_answer(page: Page) -> Any:
    return page.locator(ANSWER).last


def _wait_done(page: Page, count: int, timeout_s: float = 150) -> None:
    """Until the ``count``-th answer is there and no answer is being generated."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if page.locator(ANSWER).count() >= count and page.get_by_role("button", name="Stop").count() == 0 \
                and page.get_by_role("button", name="Regenerate").count() > 0:
            page.wait_for_timeout(1500)  # the source events and the saved chat
            return
        page.wait_for_timeout(300)
    raise TimeoutError("the answer did not finish")


def ask(page: Page, spec: dict[str, Any]) -> dict[str, Any]:
    base = spec["base"]
    _home(page, base + (f"/c/{spec['chat_id']}" if spec.get("chat_id") else "/"))
    before = page.locator(ANSWER).count()
    if spec.get("regenerate"):
        _last_answer(page).hover()
        page.get_by_role("button", name="Regenerate").last.click()
        page.get_by_text(spec["regenerate"], exact=True).click()
    else:
        if spec.get("file"):
            page.get_by_role("button", name="More").last.click()
            with page.expect_file_chooser() as chooser:
                page.get_by_text("Upload Files", exact=True).click()
            chooser.value.set_files(spec["file"])
            page.get_by_text(Path(spec["file"]).name).first.wait_for()
            page.wait_for_timeout(2500)  # uploaded and processed
        page.locator("#chat-input").click()
        page.keyboard.type(spec["question"])
        page.keyboard.press("Enter")
    result: dict[str, Any] = {}
    if spec.get("stop_after_chars"):
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if page.locator(ANSWER).count() > before and len(_last_answer(page).inner_text()) >= spec["stop_after_chars"]:
                break
            page.wait_for_timeout(100)
        page.get_by_role("button", name="Stop").first.click()
        result["stopped_at"] = time.time()
        page.wait_for_timeout(2000)
    else:
        _wait_done(page, before + (0 if spec.get("regenerate") else 1))
    result["chat_id"] = page.url.rstrip("/").rsplit("/c/", 1)[-1]
    result["answer"] = _last_answer(page).evaluate(READ_ANSWER)
    _shot(spec, page, "answer")
    if spec.get("open_source"):
        _last_answer(page).evaluate("el => (el.closest('[id^=\"message-\"]') || el.parentElement)"
                                    ".querySelector('button[aria-label^=\"Toggle\"]').click()")
        page.wait_for_timeout(500)
        result["answer"] = _last_answer(page).evaluate(READ_ANSWER)
        n = int(spec["open_source"])
        page.locator(f'button[id^="source-"][id$="-{n}"]').last.click()
        panel = page.locator("[role=dialog]").last
        panel.get_by_text("Content").first.wait_for()
        page.wait_for_timeout(500)
        _shot(spec, page, "panel")
        result["panel"] = {"text": panel.inner_text(), "links": [a.get_attribute("href") for a in panel.locator("a").all()]}
        page.keyboard.press("Escape")
    page.reload(wait_until="domcontentloaded")
    page.locator(ANSWER).last.wait_for()
    page.wait_for_timeout(2500)
    result["reloaded"] = _last_answer(page).evaluate(READ_ANSWER)
    _shot(spec, page, "reloaded")
    return result


ACTIONS = {"signup": signup, "connect": connect, "model": model, "task_model": task_model, "ask": ask}


def main(spec: dict[str, Any]) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            page = _page(browser, spec["base"], spec.get("token"))
            try:
                result = ACTIONS[spec["action"]](page, spec)
            except Exception:
                _shot(spec, page, "failed")
                raise
        finally:
            browser.close()
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
