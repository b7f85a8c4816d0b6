"""What a staff user reads in Open WebUI when ancre cannot simply answer: French, about his own
situation, and saying what to do — never a raw English error.

Three situations that must not be confused (docs/OPENWEBUI.md):

- **the documents do not say it**: the standard refusal « Cette information ne figure pas dans
  les documents disponibles. » (:data:`~ancre.query.prompt.REFUSAL`), left as it is — plus, in
  extractive mode (no model configured), a sentence saying that ancre then only quotes passages
  holding the question's terms (:data:`EXTRACTIVE_REFUSAL_NOTE`);
- **his account is unknown to the directory** (no principal provider knows him, control
  ``utilisateur_inconnu``): he is told so, with the e-mail received, and whom to contact
  (:func:`unknown_user`) — it concerns him only, nothing about any document is disclosed;
- **the service cannot answer** (index not built yet, model unavailable or not installed on its
  server, directory, index or audit log unavailable, his identity not verifiable): the HTTP error
  keeps its status and ``code``, its ``message`` becomes :meth:`StaffMessages.error` — the English detail stays in ancre's log.

``contact`` is ``api.support_contact``, a French noun phrase (« votre service informatique »).
"""

from __future__ import annotations

from dataclasses import dataclass

from ancre.query.markdown import escape_inline

STAFF_PATHS = ("/v1/chat/completions",)
"""The routes whose error messages staff read (through Open WebUI); ``/query`` and ``/v1/models``
keep English messages for machines and admins."""

ATTACHMENTS_NOTE = (
    "ℹ️ ancre ne lit pas les fichiers joints ni les autres sources ajoutées dans Open WebUI : "
    "la réponse ci-dessous repose uniquement sur les documents de l'entreprise auxquels vous avez accès."
)
"""The one sentence put before an answer whose question came with attachments (:mod:`ancre.api.attachments`)."""

EXTRACTIVE_REFUSAL_NOTE = (
    "Aucun modèle de langage n'est configuré : ancre cite alors les passages de vos documents qui "
    "contiennent les termes de votre question, et n'en a trouvé aucun ; essayez avec les mots qu'emploient les documents."
)
"""Added after the refusal of an extractive answer whose context was not empty."""

_IDENTITY_HINTS = {
    "invalid_api_key": "la clé de la connexion ancre dans Open WebUI n'est pas celle d'ancre (api.api_key)",
    "missing_user_jwt": "Open WebUI n'envoie pas le jeton d'identité signé (ENABLE_FORWARD_USER_INFO_HEADERS=true et "
                        "FORWARD_USER_INFO_HEADER_JWT_SECRET dans l'environnement d'Open WebUI)",
    "invalid_user_jwt": "le jeton d'identité d'Open WebUI n'est pas signé avec le secret d'ancre : "
                        "FORWARD_USER_INFO_HEADER_JWT_SECRET d'Open WebUI et le secret api.user_jwt_secret "
                        "d'ancre doivent avoir la même valeur (voir `ancre check`)",
    "expired_user_jwt": "le jeton d'identité d'Open WebUI est expiré : les horloges des deux serveurs diffèrent (NTP)",
    "plain_identity_refused": "Open WebUI envoie l'identité sans jeton signé alors qu'ancre en exige un "
                              "(FORWARD_USER_INFO_HEADER_JWT_SECRET manque dans l'environnement d'Open WebUI)",
    "missing_identity": "Open WebUI ne transmet pas l'utilisateur (ENABLE_FORWARD_USER_INFO_HEADERS=true manque)",
    "invalid_identity": "l'adresse e-mail transmise par Open WebUI ne désigne pas un compte (api.identity, api.user_map)",
    "missing_signature": "la signature d'identité manque (api.signing_secret)",
    "invalid_signature": "la signature d'identité est invalide (api.signing_secret)",
    "stale_signature": "la signature d'identité est périmée : les horloges diffèrent (NTP)",
}

_SERVICE = {
    "index_not_ready": "ancre démarre : l'indexation des documents n'est pas encore terminée. "
                       "Réessayez dans quelques minutes.",
    "model_unavailable": "Le modèle de langage qui rédige les réponses d'ancre ne répond pas (il est peut-être "
                         "en cours de chargement). Réessayez dans quelques minutes ; si cela dure, contactez {contact}.",
    "model_missing": "Le modèle de langage qui rédige les réponses d'ancre n'est pas installé sur son serveur : "
                     "ancre ne peut pas répondre pour le moment. Contactez {contact} (la commande qui corrige cela "
                     "est dans le journal d'ancre).",
    "directory_unavailable": "L'annuaire de l'entreprise ne répond pas : sans lui ancre ne peut pas vérifier vos "
                             "droits, et ne répond donc pas. Réessayez dans quelques minutes ; si cela dure, "
                             "contactez {contact}.",
    "audit_unavailable": "Le journal d'audit d'ancre ne peut pas être écrit : la réponse n'est donc pas donnée. "
                         "Contactez {contact}.",
    "index_unavailable": "L'index des documents d'ancre est indisponible. Réessayez dans quelques minutes ; "
                         "si cela dure, contactez {contact}.",
    "service_unavailable": "ancre est momentanément indisponible. Réessayez dans quelques minutes ; si cela dure, "
                           "contactez {contact}.",
    "too_many_connections": "ancre est très sollicité en ce moment. Réessayez dans un instant.",
    "internal_error": "ancre a rencontré une erreur interne. Réessayez ; si cela se répète, contactez {contact} "
                      "(le détail est dans le journal d'ancre).",
    "body_too_large": "Votre message est trop volumineux pour ancre. ancre ne lit pas les fichiers joints : "
                      "retirez-les et posez votre question seule.",
    "interrupted": "La réponse a été interrompue.",
    "request_timeout": "Votre message n'est pas arrivé complet à ancre. Réessayez.",
    "model_not_found": "Ce modèle n'est pas servi par ancre. Choisissez le modèle « ancre » ou contactez {contact}.",
    "question_too_long": "Votre question est trop longue pour ancre. Raccourcissez-la (ancre ne lit pas les documents "
                         "collés ou joints : posez seulement votre question).",
}


@dataclass(frozen=True)
class StaffMessages:
    """The French messages for staff, with ``contact`` (``api.support_contact``) filled in."""

    contact: str

    def error(self, code: str | None) -> str:
        """The message shown instead of an error's English ``message``, by its ``code``
        (identity codes name the check that failed, for the admin the user forwards it to)."""
        hint = _IDENTITY_HINTS.get(code or "")
        if hint is not None:
            return (f"ancre n'a pas pu vérifier votre identité transmise par Open WebUI : contactez {self.contact} "
                    f"en lui transmettant ce message. Pour l'administrateur : {hint} (code {code}).")
        text = _SERVICE.get(code or "")
        if text is None:
            return (f"ancre n'a pas pu traiter la demande d'Open WebUI (code {code}) : contactez {self.contact} "
                    "en lui transmettant ce message.")
        return text.format(contact=self.contact)

    def unusable_identity(self, shown: str) -> str:
        """The 401 answer to an identity carrying whitespace or an invisible character
        (``invalid_identity_chars``; ``shown``: the address with those characters written
        ``[U+00A0]``): like :meth:`unknown_user` — the account is unknown — saying why. Plain
        text, not Markdown: Open WebUI shows an error's message as it is."""
        who = f"Votre compte « {shown} »" if shown else "Votre compte"
        return (f"{who} n'est pas connu de l'annuaire de l'entreprise : son adresse contient un espace ou un "
                "caractère invisible (noté U+… ci-dessus) qu'aucun compte de l'annuaire ne porte. ancre ne peut donc pas "
                f"vérifier vos droits d'accès et ne vous montre aucun document. Contactez {self.contact} : votre "
                "adresse dans Open WebUI doit être exactement celle de votre compte de l'annuaire.")

    def unknown_user(self, identity: str) -> str:
        """The answer to a user no principal provider knows (``identity``: the e-mail received)."""
        who = f"Votre compte « {escape_inline(identity)} »" if identity else "Votre compte"
        return (f"{who} n'est pas connu de l'annuaire de l'entreprise : ancre ne peut donc pas vérifier vos droits "
                f"d'accès et ne vous montre aucun document. Contactez {self.contact} : votre adresse dans Open WebUI "
                "doit correspondre à votre compte de l'annuaire.")


__all__ = ["ATTACHMENTS_NOTE", "EXTRACTIVE_REFUSAL_NOTE", "STAFF_PATHS", "StaffMessages"]
