"""``POST /query`` ``{"question"}``, the route for machines (docs/API.md).

200 ``{reponse, sources, ancree, controles, verification, extractive, documents_ecartes,
versions}`` (and ``liste`` for a list question) when the answer is grounded (``ancree: true``,
refusals included) or not established
(``ancree: null``, ``verification: "non_effectuee"``: the judge could not run); 422
``{reponse_bloquee, sources, ancree: false, controles, verification, citations_inventees,
affirmations_non_sourcees, faits_non_sources, documents_ecartes, versions}`` when it is not
grounded (a control or the judge refused it; ``faits_non_sources``: the figures, dates, codes and
names found in no extract the answer cites, control 5; ``contexte_tronque`` among ``controles``:
the model's server read less of the prompt than was sent). ``reponse_incomplete``: the answer
stopped on the model's token budget (control ``reponse_tronquee``). ``reponse`` has each citation
followed by its folder.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response

from ancre.api.errors import ERROR_RESPONSES
from ancre.api.identity import Identity
from ancre.api.questions import check_question
from ancre.api.render import (
    facts_out,
    incomplete,
    listing_out,
    resolved_question,
    sources_out,
    unchecked_out,
    verdict_headers,
    versions_out,
)
from ancre.api.schemas import ErrorResponse, QueryAnswer, QueryBlocked, QueryRequest
from ancre.api.service import ApiContext, AuthDependencies
from ancre.query.answer import Answer


def query_router(ctx: ApiContext, auth: AuthDependencies) -> APIRouter:
    """``/query`` over ``ctx``."""
    router = APIRouter()
    blocked_doc = {
        "model": QueryBlocked | ErrorResponse, "description": "Not grounded (reponse_bloquee), or a bad request (error).",
    }

    @router.post("/query", response_model=QueryAnswer, responses={**ERROR_RESPONSES, 422: blocked_doc})
    def query(body: QueryRequest, identity: Identity = Depends(auth.require_identity)) -> Response:
        """A question in, the grounded answer out — or HTTP 422 when it is not grounded."""
        question = check_question(body.question, ctx.settings.api.max_question_chars, "question")
        ctx.require_ready()
        answer = ctx.service.ask(question, identity.user, asked_by=identity.header)
        ctx.metrics.answer("query", answer)
        return query_response(answer)

    return router


def _listing(answer: Answer) -> dict[str, object]:
    """``{"liste": …}`` for a list question, ``{}`` otherwise (:func:`~ancre.api.render.listing_out`)."""
    listing = listing_out(answer)
    return {} if listing is None else {"liste": listing}


def query_response(answer: Answer) -> JSONResponse:
    """``answer`` as ``/query`` returns it: 200, or 422 ``reponse_bloquee`` when ``ancree`` is
    ``False``; with the verdict headers."""
    sources = sources_out(answer)
    if answer.ancree is False:
        return JSONResponse(
            {
                "reponse_bloquee": answer.reponse, "sources": sources, "ancree": False,
                "controles": list(answer.controles), "verification": answer.verification,
                "citations_inventees": list(answer.invented), "affirmations_non_sourcees": list(answer.unsourced),
                "faits_non_sources": facts_out(answer), "documents_ecartes": unchecked_out(answer),
                "versions": versions_out(answer), "reponse_incomplete": incomplete(answer), **_listing(answer),
            },
            status_code=422, headers=verdict_headers(answer),
        )
    return JSONResponse(
        {
            "reponse": answer.reponse, "sources": sources, "ancree": answer.ancree,
            "controles": list(answer.controles), "verification": answer.verification,
            "extractive": answer.extractive, "documents_ecartes": unchecked_out(answer),
            "versions": versions_out(answer), "question_traitee": resolved_question(answer),
            "reponse_incomplete": incomplete(answer),
            **_listing(answer),
        },
        headers=verdict_headers(answer),
    )


__all__ = ["query_response", "query_router"]
