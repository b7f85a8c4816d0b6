"""Open an Open WebUI chat in headless Chromium as a signed-in user: screenshot and DOM checks.

Run with the Python of Open WebUI's test environment (it has Playwright; the browser is Debian's
Chromium, no browser download): ``python owui_browser.py <base url> <token> <chat id> <png> <text>``: once the answer shows
``<text>``, the page is captured.
Prints one JSON object: ``{"table": bool, "header_cells": [...], "sources": bool, "ordered_lists":
int, "text": str}`` read from the rendered answer. Every request to a host other than 127.0.0.1 is
aborted (the test never reaches the network).
"""

from __future__ import annotations

import json
import sys
from urllib.parse import urlsplit

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"


def main(base: str, token: str, chat_id: str, png: str, text: str) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 1100})
        page.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname in ("127.0.0.1", None)
                   else route.abort())
        page.add_init_script(f"window.localStorage.setItem('token', {json.dumps(token)});")
        page.goto(f"{base}/c/{chat_id}", wait_until="domcontentloaded")
        answer = page.locator("#response-content-container, .chat-assistant").last
        answer.get_by_text(text, exact=False).first.wait_for(timeout=60_000)
        page.wait_for_timeout(500)
        result = answer.evaluate(
            """el => ({
                table: !!el.querySelector('table'),
                header_cells: [...el.querySelectorAll('table th')].map(th => th.innerText.trim()),
                sources: [...el.querySelectorAll('strong')].some(s => s.innerText.includes('Sources')),
                source_items: [...el.querySelectorAll('li')].map(li => li.innerText.trim()),
                ordered_lists: el.querySelectorAll('ol').length,
                text: el.innerText,
            })"""
        )
        page.screenshot(path=png, full_page=True)
        browser.close()
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main(*sys.argv[1:6])
