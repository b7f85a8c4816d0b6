"""Generated French business documents for the scale bench's calibration (``scale_calibration``):
a seeded corpus of the kinds of text a small Swiss fiduciary, law or IT-services firm keeps —
maintenance contracts, offers, IT procedures, HR notes, minutes, audit reports, accounting
mandates, security policies, client letters, technical documentation, invoices, project plans.

Each kind has its own sentence templates; a document is one kind about one subject (a client, a
product, a person, a year) and holds 10–20 chunks of 4–7 sentences drawn from its kind's
templates with its subject's values. A question is asked about one chunk: a template of the
chunk's kind filled with the document's subject, so what it asks is in that chunk. Not a test: a
module of the bench (``run.py`` runs only ``bench_*.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CLIENTS = (
    "Baumont Industries", "Étude Rochat", "Fiduciaire Morel", "Clinique des Alpes", "Garage Favre",
    "Boulangerie Perrin", "Cabinet Dufour", "Transports Meylan", "Hôtel du Lac", "Commune de Vernier",
    "Pharmacie Centrale", "Menuiserie Gilliéron", "Atelier Chappuis", "Régie Bonvin", "Imprimerie Jaquet",
    "Cave de la Côte", "Assurances Mauron", "École Montessori Lancy", "Laboratoire Genoud", "Bureau Vuilleumier",
)
PEOPLE = (
    "Alice Martin", "Bruno Keller", "Chloé Dubois", "David Rochat", "Emma Favre", "François Meier",
    "Gaëlle Schmid", "Hugo Bernasconi", "Inès Moreau", "Julien Pasche", "Karine Weber", "Luc Tinguely",
)
PRODUCTS = (
    "OPNsense", "Microsoft 365", "Veeam Backup", "Synology DS920+", "FortiGate 60F", "Windows Server 2022",
    "Bitdefender GravityZone", "Exchange Online", "SharePoint", "Abacus", "Bexio", "Proxmox VE",
)
CITIES = ("Genève", "Lausanne", "Nyon", "Morges", "Vevey", "Fribourg", "Sion", "Neuchâtel")
MONTHS = ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre", "novembre", "décembre")

KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "contrat de maintenance": ((
        "Le présent contrat de maintenance lie {client} et Axonix Sàrl pour le parc informatique du site de {city}.",
        "Le forfait mensuel s'élève à CHF {amount} HT et couvre {n} postes de travail.",
        "Le délai d'intervention en cas de panne critique est de {hours} heures ouvrables.",
        "Les interventions hors forfait sont facturées CHF {rate} de l'heure, par tranche de quinze minutes.",
        "Le contrat est conclu pour une durée de {years} ans et se renouvelle tacitement d'année en année.",
        "Chaque partie peut le résilier moyennant un préavis de {notice} mois pour la fin d'un trimestre.",
        "La maintenance préventive comprend la mise à jour de {product} et le contrôle des sauvegardes.",
        "Le responsable du contrat chez {client} est {person}, joignable au secrétariat.",
        "Les pièces de rechange ne sont pas comprises dans le forfait et font l'objet d'une offre séparée.",
        "Le support téléphonique est assuré du lundi au vendredi de 8 h à 17 h.",
        "Un rapport d'intervention est remis au client après chaque déplacement sur site.",
        "Les prix s'entendent hors TVA et sont indexés chaque année sur l'indice des prix à la consommation.",
    ), (
        "Quel est le forfait mensuel du contrat de maintenance de {client} ?",
        "Quel délai d'intervention prévoit le contrat de {client} en cas de panne ?",
        "Comment résilier le contrat de maintenance de {client} ?",
    )),
    "offre commerciale": ((
        "Suite à notre entretien du {day} {month}, nous avons le plaisir de vous soumettre notre offre pour {client}.",
        "L'offre porte sur la migration de la messagerie vers {product} pour {n} utilisateurs.",
        "Le montant total du projet s'élève à CHF {amount} HT, installation et formation comprises.",
        "La validité de la présente offre est de {notice} mois à compter de sa date d'émission.",
        "Le planning prévoit une mise en production au mois de {month}, après une phase pilote.",
        "Un acompte de trente pour cent est demandé à la signature du bon de commande.",
        "Nos conditions générales de vente s'appliquent, sauf mention contraire dans la présente offre.",
        "La formation des utilisateurs est assurée par {person} en deux demi-journées sur site à {city}.",
        "Les licences {product} sont facturées séparément selon le tarif en vigueur de l'éditeur.",
        "Nous restons à votre disposition pour tout complément d'information.",
        "Les frais de déplacement sont inclus dans le forfait pour le canton de {city}.",
    ), (
        "Quel est le montant de l'offre faite à {client} pour {product} ?",
        "Combien de temps l'offre à {client} reste-t-elle valable ?",
    )),
    "procédure informatique": ((
        "Cette procédure décrit la sauvegarde quotidienne des serveurs de fichiers avec {product}.",
        "La sauvegarde complète est lancée chaque vendredi à 22 h et les incrémentales les autres soirs.",
        "Les copies sont conservées {n} jours sur le NAS puis externalisées sur un disque chiffré.",
        "En cas d'échec, l'alerte est envoyée par courriel au support et à {person}.",
        "La restauration d'un fichier se fait depuis la console d'administration, onglet Restauration.",
        "Un test de restauration complet est effectué chaque trimestre et consigné dans le registre.",
        "Les mots de passe des comptes de service sont stockés dans le coffre-fort de l'équipe technique.",
        "Avant toute mise à jour de {product}, vérifier que la dernière sauvegarde est valide.",
        "La procédure a été validée par la direction le {day} {month} et entre en vigueur immédiatement.",
        "Pour le VPN, l'utilisateur installe le client et importe le profil fourni par le support.",
        "L'authentification à deux facteurs est obligatoire pour tout accès à distance.",
        "Les journaux d'accès sont conservés douze mois puis supprimés automatiquement.",
    ), (
        "Comment restaurer un fichier depuis la sauvegarde {product} ?",
        "Combien de jours les sauvegardes sont-elles conservées ?",
        "Comment configurer le VPN pour le télétravail ?",
    )),
    "note RH": ((
        "La présente note informe l'ensemble du personnel des nouvelles règles relatives aux vacances.",
        "Chaque collaborateur dispose de {n} jours de vacances par année civile, au prorata du taux d'activité.",
        "Les demandes de congé sont adressées à {person} au moins un mois à l'avance.",
        "Le salaire est versé le {day} de chaque mois sur le compte bancaire indiqué par le collaborateur.",
        "Le treizième salaire est versé en deux fois, en juin et en décembre.",
        "Les heures supplémentaires sont compensées en temps libre dans un délai de trois mois.",
        "L'entretien annuel d'évaluation a lieu au mois de {month} avec le supérieur hiérarchique.",
        "Les frais professionnels sont remboursés sur présentation des justificatifs originaux.",
        "En cas de maladie, un certificat médical est exigé dès le troisième jour d'absence.",
        "Le télétravail est possible deux jours par semaine, selon l'accord du responsable d'équipe.",
        "Les nouveaux collaborateurs suivent une journée d'accueil à {city} durant leur première semaine.",
    ), (
        "Combien de jours de vacances ont les collaborateurs ?",
        "Quand le salaire est-il versé ?",
        "À qui adresser une demande de congé ?",
    )),
    "procès-verbal": ((
        "Procès-verbal de la séance du conseil de direction du {day} {month}, tenue à {city}.",
        "Sont présents {person}, la direction générale et le responsable financier.",
        "Le procès-verbal de la séance précédente est approuvé à l'unanimité sans modification.",
        "Le chiffre d'affaires du trimestre atteint CHF {amount} milliers, en hausse par rapport au budget.",
        "Le conseil décide de reporter le projet {product} au prochain exercice.",
        "Le recrutement d'un technicien supplémentaire est validé pour le site de {city}.",
        "Le dossier {client} est présenté ; une décision sera prise lors de la prochaine séance.",
        "La prochaine séance est fixée au {day} {month} à 14 h dans la salle de conférence.",
        "Divers : le déménagement des archives est prévu pour la fin de l'année.",
        "La séance est levée à 17 h 30.",
    ), (
        "Qu'a décidé le conseil de direction au sujet du projet {product} ?",
        "Quand a lieu la prochaine séance du conseil de direction ?",
    )),
    "rapport d'audit": ((
        "Le présent rapport présente les résultats de l'audit de sécurité réalisé chez {client}.",
        "L'audit a porté sur le pare-feu {product}, les postes de travail et la gestion des accès.",
        "Nous avons relevé {n} écarts, dont trois de criticité élevée nécessitant une action rapide.",
        "Les comptes administrateurs ne sont pas protégés par une authentification à deux facteurs.",
        "Plusieurs postes ne reçoivent plus les mises à jour de sécurité depuis le mois de {month}.",
        "La politique de mots de passe n'impose ni longueur minimale ni renouvellement.",
        "Les sauvegardes ne sont pas testées et aucune copie n'est conservée hors site.",
        "Nous recommandons de segmenter le réseau et d'isoler les serveurs dans une zone dédiée.",
        "Un plan d'action est proposé avec un budget estimé à CHF {amount} HT.",
        "L'audit a été conduit par {person} entre le {day} et la fin du mois de {month}.",
        "Le rapport est strictement confidentiel et destiné à la direction de {client}.",
    ), (
        "Quels écarts l'audit de sécurité de {client} a-t-il relevés ?",
        "Que recommande le rapport d'audit de {client} ?",
    )),
    "mandat fiduciaire": ((
        "Le mandat confie à la Fiduciaire la tenue de la comptabilité de {client} pour l'exercice {year}.",
        "Les pièces comptables sont transmises chaque mois, au plus tard le {day}, par voie électronique.",
        "La Fiduciaire établit les décomptes TVA trimestriels selon la méthode effective.",
        "Les honoraires annuels sont fixés à CHF {amount} HT, payables en quatre acomptes.",
        "Le bouclement annuel comprend le bilan, le compte de résultat et l'annexe.",
        "La déclaration d'impôt de la société est préparée et soumise à la signature du conseil.",
        "Les salaires sont traités dans {product} et les attestations remises en janvier.",
        "Le mandataire est tenu au secret professionnel pour toutes les informations reçues.",
        "Le mandat peut être résilié en tout temps, les honoraires dus restant acquis.",
        "L'interlocuteur désigné pour ce mandat est {person}.",
    ), (
        "Quels sont les honoraires du mandat fiduciaire de {client} ?",
        "Quand les pièces comptables de {client} doivent-elles être transmises ?",
    )),
    "politique de sécurité": ((
        "La politique de sécurité de l'information s'applique à tous les collaborateurs et prestataires.",
        "Les mots de passe comptent au moins {n} caractères et sont uniques pour chaque service.",
        "Les postes de travail sont verrouillés automatiquement après cinq minutes d'inactivité.",
        "Les supports amovibles sont interdits, sauf autorisation écrite de {person}.",
        "Les données des clients sont classées confidentielles et chiffrées au repos.",
        "Tout incident de sécurité est annoncé sans délai au responsable de la sécurité.",
        "Les accès sont attribués selon le principe du moindre privilège et revus chaque semestre.",
        "L'utilisation de {product} pour le partage de fichiers est la seule autorisée.",
        "Les prestataires signent un accord de confidentialité avant tout accès aux systèmes.",
        "La présente politique est revue chaque année par la direction.",
    ), (
        "Quelle est la politique de mots de passe de l'entreprise ?",
        "Que faire en cas d'incident de sécurité ?",
    )),
    "courrier client": ((
        "Madame, Monsieur, nous accusons réception de votre courrier du {day} {month}.",
        "Concernant la facture numéro {invoice}, nous confirmons que le montant de CHF {amount} a été crédité.",
        "Nous regrettons les désagréments causés par la panne de {product} survenue la semaine dernière.",
        "Un technicien se rendra dans vos locaux de {city} pour contrôler l'installation.",
        "À titre de geste commercial, nous vous accordons une réduction sur la prochaine intervention.",
        "Votre interlocuteur pour ce dossier reste {person}, qui vous contactera prochainement.",
        "Nous vous prions d'agréer, Madame, Monsieur, nos salutations distinguées.",
        "Vous trouverez en annexe le rapport d'intervention signé par notre technicien.",
        "Nous vous remercions de la confiance que vous accordez à notre entreprise.",
    ), (
        "Quelle réponse a été faite à {client} au sujet de la facture {invoice} ?",
        "Qui est l'interlocuteur de {client} pour la panne de {product} ?",
    )),
    "documentation technique": ((
        "Ce document décrit la configuration du pare-feu {product} installé chez {client}.",
        "L'interface WAN est raccordée au routeur de l'opérateur, l'interface LAN au commutateur principal.",
        "Les règles de filtrage autorisent le trafic sortant HTTP, HTTPS et DNS uniquement.",
        "Le VPN site à site relie le bureau de {city} au centre de données par IPsec.",
        "Les mises à jour du micrologiciel sont appliquées le premier mardi de chaque mois.",
        "L'accès à l'interface d'administration est limité au réseau de gestion.",
        "La règle WD-EXCL-{n} exclut le dossier de la comptabilité de l'analyse antivirus en temps réel.",
        "Les journaux sont envoyés au serveur syslog et conservés {n} jours.",
        "Le plan d'adressage attribue le sous-réseau 10.{n}.0.0/24 aux postes de travail.",
        "La configuration est sauvegardée après chaque modification dans le dépôt de l'équipe.",
    ), (
        "Comment est configuré le pare-feu {product} de {client} ?",
        "Que dit la règle d'exclusion antivirus WD-EXCL-{n} ?",
    )),
    "facture": ((
        "Facture numéro {invoice} adressée à {client}, {city}, datée du {day} {month} {year}.",
        "Intervention sur site pour le remplacement d'un disque du serveur {product}.",
        "Main-d'œuvre : {n} heures au tarif de CHF {rate} de l'heure.",
        "Matériel fourni selon le bon de livraison joint à la présente facture.",
        "Total hors taxes CHF {amount}, TVA au taux légal en sus.",
        "Payable à trente jours net sur le compte indiqué au bas de la présente.",
        "En cas de retard de paiement, un intérêt moratoire de cinq pour cent sera facturé.",
        "Merci d'indiquer le numéro de facture lors de votre versement.",
    ), (
        "Quel est le montant de la facture {invoice} de {client} ?",
        "Quel tarif horaire figure sur la facture adressée à {client} ?",
    )),
    "plan de projet": ((
        "Le projet de renouvellement du parc informatique de {client} démarre au mois de {month}.",
        "Le chef de projet est {person}, assisté d'un technicien à plein temps.",
        "La première phase consiste à inventorier les {n} postes et leurs logiciels.",
        "La deuxième phase installe {product} sur les nouveaux postes et migre les profils.",
        "Le budget du projet est arrêté à CHF {amount} HT, réserve pour imprévus comprise.",
        "Les risques identifiés sont le retard de livraison du matériel et l'indisponibilité des utilisateurs.",
        "Un comité de pilotage se réunit toutes les deux semaines à {city}.",
        "La recette finale est prévue en {month}, suivie d'une période de garantie de trois mois.",
        "Les anciens postes sont effacés selon la norme puis recyclés par un prestataire agréé.",
    ), (
        "Quel est le budget du projet de renouvellement de {client} ?",
        "Qui dirige le projet de renouvellement du parc de {client} ?",
    )),
}


@dataclass(frozen=True)
class FrenchDoc:
    """One generated document: its ``kind`` (a key of :data:`KINDS`), ``title`` and ``chunks``."""

    kind: str
    title: str
    chunks: tuple[str, ...]


@dataclass(frozen=True)
class FrenchQuestion:
    """A question about chunk ``chunk`` of document ``doc``."""

    text: str
    doc: int
    chunk: int


def _values(rng: np.random.Generator) -> dict[str, str]:
    """One document's subject: the values of its template slots."""
    return {
        "client": CLIENTS[int(rng.integers(len(CLIENTS)))], "person": PEOPLE[int(rng.integers(len(PEOPLE)))],
        "product": PRODUCTS[int(rng.integers(len(PRODUCTS)))], "city": CITIES[int(rng.integers(len(CITIES)))],
        "month": MONTHS[int(rng.integers(12))], "day": str(int(rng.integers(1, 29))),
        "year": str(int(rng.integers(2019, 2026))), "amount": f"{int(rng.integers(4, 900)) * 10:,}".replace(",", " "),
        "rate": str(int(rng.integers(12, 22)) * 10), "n": str(int(rng.integers(2, 90))),
        "hours": str(int(rng.choice([2, 4, 8, 24]))), "years": str(int(rng.integers(1, 4))),
        "notice": str(int(rng.integers(1, 7))), "invoice": f"{int(rng.integers(2019, 2026))}-{int(rng.integers(1, 999)):03d}",
    }


def corpus(n_docs: int = 200, seed: int = 23) -> tuple[list[FrenchDoc], list[FrenchQuestion]]:
    """``n_docs`` documents (kinds in turn, so each kind has ``n_docs / len(KINDS)``) of 10–20
    chunks each, and one question per document about one of its chunks. Deterministic for a seed."""
    rng = np.random.default_rng(seed)
    kinds = list(KINDS)
    docs: list[FrenchDoc] = []
    questions: list[FrenchQuestion] = []
    for d in range(n_docs):
        kind = kinds[d % len(kinds)]
        sentences, asks = KINDS[kind]
        values = _values(rng)
        chunks = []
        for _ in range(int(rng.integers(10, 21))):
            picked = rng.choice(len(sentences), size=int(rng.integers(4, 8)), replace=False)
            chunks.append(" ".join(sentences[i].format(**values) for i in sorted(picked)))
        title = f"{kind.capitalize()} – {values['client']}"
        docs.append(FrenchDoc(kind, title, tuple(f"{title}. {c}" for c in chunks)))
        questions.append(FrenchQuestion(asks[int(rng.integers(len(asks)))].format(**values), d, int(rng.integers(len(chunks)))))
    return docs, questions
