"""Aspect prototypes: short descriptions of common life facets.

Two memories that both sit close to the same prototype are about the same facet even when
their words differ ("lived in a flat in Seattle" / "signed a lease in Portland").
"""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt

from caap._embeddings import Embedder

__all__ = ["PROTOTYPES", "prototype_matrix"]

PROTOTYPES: dict[str, str] = {
    "residence": "where someone lives, their home address, moving house, renting a flat, a lease",
    "employment": "someone's job, employer, job title, salary and promotion",
    "work_schedule": "work shifts, working hours, days in the office or working from home",
    "commute": "how someone commutes to work: bike, bus, train, car, walking",
    "alcohol": "drinking alcohol: beer, wine, how much someone drinks",
    "caffeine": "coffee, tea and caffeine habits",
    "diet": "what someone eats, diet, vegetarian or vegan phases, food preferences",
    "exercise": "exercise and fitness routine: gym, running, swimming, training plans",
    "sleep": "sleep schedule, bedtime, waking up, naps, insomnia",
    "medication": "medication, medicine doses, prescriptions and drug contraindications",
    "allergy": "allergies and allergic reactions to food or medicine",
    "medical_care": "doctor visits, diagnoses, treatment plans, therapy and rehabilitation",
    "budgeting": "tracking expenses, budgeting, checking the bank balance",
    "saving_investing": "savings, investing money, retirement accounts",
    "bills_taxes": "paying bills, invoices, taxes and tax payments",
    "communication": "how someone prefers to communicate: texting, calling, email, messages",
    "meetings_notes": "meetings and how someone takes notes",
    "travel": "travel, flights, airports, hotels and trips",
    "childcare": "childcare, school pickup and who may collect a child",
    "parenting_rules": "rules for children: screen time, chores, allowance, homework",
    "elder_care": "caring for an elderly parent, consent and medical decisions for them",
    "pets": "pets: a dog or cat, feeding, pet sitting, pets allowed in a building",
    "home_upkeep": "home maintenance, repairs, renovation, cleaning and chores",
    "social_life": "social plans, parties, friends, going out",
    "hobbies": "hobbies like music, games, reading and crafts",
    "access_authorization": "who is authorized to access, approve, sign or withdraw",
    "records_documents": "official records, certificates, forms and documents",
    "legal": "legal matters, contracts, custody and court orders",
    "education": "studying, courses, exams, school and university",
    "news_media": "reading news, social media and screen habits",
    "smoking": "smoking or vaping",
}

_cache: dict[int, npt.NDArray[np.float32]] = {}
_lock = threading.Lock()


def prototype_matrix(embedder: Embedder) -> npt.NDArray[np.float32]:
    """Unit vectors of :data:`PROTOTYPES` (rows in dict order), cached per embedder."""
    with _lock:
        key = id(embedder)
        if key not in _cache:
            _cache[key] = embedder.encode(list(PROTOTYPES.values()))
        return _cache[key]
