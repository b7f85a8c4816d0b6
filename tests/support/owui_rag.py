"""Open WebUI's own code renders what it sends a connection when a question comes with sources:
run with the Python of Open WebUI's test environment, reads a JSON list of cases on stdin and
prints, for each, the ``messages`` Open WebUI 0.12 would send.

A case is ``{"question", "sources": [{"source": {...}, "document": [...], "metadata": [...]}],
"template": null | str, "system_context": bool, "files": [{"id", "url", "name"}]}``. The
rendering is Open WebUI's: ``open_webui.utils.middleware.get_source_context`` (the ``<source
id>`` tags), ``open_webui.utils.task.rag_template`` with the template (``None``:
``open_webui.config.DEFAULT_RAG_TEMPLATE``), then ``add_or_update_user_message(…,
append=False)`` — or, with ``system_context`` (``RAG_SYSTEM_CONTEXT=true``),
``add_or_update_system_message(…, append=True)`` — as ``apply_source_context_to_messages``
does, and ``add_file_context`` for ``files`` (the model's native tools).

Importing Open WebUI opens its database: ``DATA_DIR`` must be a writable folder.
"""

from __future__ import annotations

import asyncio
import json
import sys


async def render(case: dict) -> list[dict]:  # type: ignore[type-arg]
    from open_webui.config import DEFAULT_RAG_TEMPLATE
    from open_webui.utils.middleware import add_file_context, get_source_context
    from open_webui.utils.misc import add_or_update_system_message, add_or_update_user_message
    from open_webui.utils.task import rag_template

    messages: list[dict] = [{"role": "user", "content": case["question"]}]  # type: ignore[type-arg]
    if case.get("files"):
        messages[0]["files"] = case["files"]
        messages = add_file_context(messages)
        messages[0].pop("files")
    if case.get("sources"):
        context = get_source_context(case["sources"]).strip()
        rendered = await rag_template(case.get("template") or DEFAULT_RAG_TEMPLATE, context, case["question"])
        if case.get("system_context"):
            messages = add_or_update_system_message(rendered, messages, append=True)
        else:
            messages = add_or_update_user_message(rendered, messages, append=False)
    return messages


def main() -> None:
    cases = json.loads(sys.stdin.read())
    out = [asyncio.run(render(c)) for c in cases]
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
