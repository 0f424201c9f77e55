"""Lexical cues used by the offline extractor: pure functions over strings, no model."""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import pairwise

from caap.conflict_graph._values import CARDINALS

__all__ = [
    "TimeCue",
    "content_words",
    "find_context",
    "find_source",
    "find_time",
    "has_change_cue",
    "has_return_cue",
    "in_own_words",
    "mask_names",
    "normalize_source",
    "split_sentences",
]

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "when",
        "whenever",
        "while",
        "unless",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "with",
        "from",
        "by",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "he",
        "she",
        "they",
        "him",
        "her",
        "them",
        "his",
        "hers",
        "their",
        "theirs",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "not",
        "no",
        "so",
        "than",
        "then",
        "too",
        "very",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "just",
        "only",
        "also",
        "about",
        "into",
        "over",
        "after",
        "before",
        "during",
        "until",
        "since",
        "per",
        "each",
        "every",
        "some",
        "any",
        "all",
        "most",
        "more",
        "much",
        "many",
        "few",
        "such",
        "own",
        "same",
        "other",
        "again",
        "there",
        "here",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "how",
        "why",
        "where",
        "up",
        "down",
        "out",
        "off",
        "once",
        "both",
        "either",
        "neither",
        "nor",
        "ever",
        "never",
        "always",
        "usually",
        "often",
        "sometimes",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "first",
        "last",
        "next",
        "day",
        "days",
        "week",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "time",
        "times",
        "get",
        "got",
        "say",
        "says",
        "said",
        "told",
        "tell",
        "according",
    ]
)

MONTHS = {
    m: i + 1
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ]
    )
}
MONTHS.update({k[:3]: v for k, v in list(MONTHS.items())})
MONTHS["sept"] = 9
SEASONS = {"winter": 1, "spring": 4, "summer": 7, "fall": 10, "autumn": 10}
#: "zero" .. "twelve" (the cardinal table of :mod:`caap.conflict_graph._values`) and
#: quantifiers read as counts in durations ("a few weeks").
NUMBER_WORDS = {w: n for w, n in CARDINALS.items() if n <= 12 and w != "oh"}
NUMBER_WORDS.update({"a": 1, "an": 1, "a couple of": 2, "a few": 3, "several": 3})

_MONTH_RE = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MDY = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_DMY = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?,?\s+(\d{{4}})\b", re.I
)
_MY = re.compile(
    rf"\b(?:(early|mid|late|the end of|the start of|the beginning of)[\s-]+)?({_MONTH_RE})\.?"
    rf"(?:\s+(?:to|through|until|-|and)\s+(?:early |mid |late )?{_MONTH_RE})?,?\s+(\d{{4}})\b",
    re.I,
)
_SEASON = re.compile(
    r"\b(?:(early|mid|late)[\s-]+)?(winter|spring|summer|fall|autumn)\s+(?:of\s+)?(\d{4})\b", re.I
)
_MONTH_ONLY = re.compile(
    rf"\b(?:in|from|during|since|by|until|through)\s+(?:(early|mid|late)[\s-]+)?({_MONTH_RE})\b(?!\s+\d)",
    re.I,
)
_YEAR = re.compile(r"\b(?:in|during|since|from|through)\s+((?:19|20)\d{2})\b", re.I)
_DURATION = re.compile(
    r"\b(?:for|over|lasting|spanning)\s+(?:about\s+|roughly\s+|nearly\s+|almost\s+|around\s+|"
    r"another\s+|the\s+next\s+|the\s+following\s+)?"
    r"((?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a|an|a couple of|"
    r"a few|several)\s+(?:straight\s+|full\s+|more\s+)?(?:day|week|month|year|weekend)s?)\b",
    re.I,
)

_RETURN = re.compile(
    r"\b(again|back to|went back|returned to|returning to|resumed|resuming|reverted|"
    r"once more|re-?started|picked (?:it )?back up|switched back|came back to)\b",
    re.I,
)
_CHANGE = re.compile(
    r"\b(now|no longer|stopped|quit|switched|moved|started|began|changed|dropped|gave up|"
    r"replaced|instead|since then|anymore|any more|signed a lease|relocated|took up)\b",
    re.I,
)

_RECORD_NOUN = (
    r"(?:records?|chart|charts|file|files|log|logs|logbook|history|report|reports|statements?|"
    r"registry|database|system|app|tracker|receipts?|summary|notes?|portal|letter|letters|"
    r"order|list|roster|forms?|documents?|certificate|card|profile|calendar|planner|data|"
    r"readings?|printout|transcript|invoices?|emails?|entry|entries|label|prescription|ledger|"
    r"spreadsheet|account|paperwork|agreement|policy|directory|register|sheet|dashboard|"
    r"readout|watch|scale|monitor|camera|lease|memo|faq|page|website|site|notice|minutes|plan|"
    r"schedule|newsletter|handbook|manual|bill|bills|stubs?|message|messages|texts?|voicemail|"
    r"review|results?|scan|survey|plat|map|permit|license|licence|quote|contract|deed|"
    r"statement|application|tags?|sticker|packaging|box|bottle|leaflet|insert|report card)"
)
_PERSON_NOUN = (
    r"(?:mother|father|mom|mum|dad|parents?|sister|brother|wife|husband|partner|spouse|"
    r"girlfriend|boyfriend|fiancée?|doctor|physician|pediatrician|paediatrician|nurse|teacher|"
    r"coach|boss|manager|supervisor|friend|roommate|flatmate|neighbou?r|landlord|landlady|lawyer|"
    r"attorney|pharmacist|therapist|accountant|colleague|coworker|co-worker|grandmother|"
    r"grandfather|grandma|grandpa|granny|gran|grandad|granddad|nan|nana|nanna|auntie|aunty|"
    r"aunt|uncle|son|daughter|cousin|ex-wife|ex-husband|"
    r"ex-partner|ex|caseworker|worker|advisor|adviser|officer|clerk|agent|banker|"
    r"specialist|dentist|surgeon|trainer|principal|counselor|counsellor|receptionist|"
    r"assistant|admin|administrator|caregiver|babysitter|nanny|sitter|mechanic|broker|"
    r"dietitian|nutritionist|physio|physiotherapist|vet|veterinarian|lead|"
    r"director|hr|registrar|secretary|tutor|mentor|sibling|stepmother|stepfather|in-laws?|"
    r"school|clinic|hospital|bank|court|insurer|employer|pharmacy|office|department|agency|"
    r"company|airline|coordinator|controller|cfo|ceo|cto|rep|representative|staff|team|"
    r"committee|board|management|firm|association|inspector|surveyor|contractor|builder|"
    r"plumber|electrician|instructor|professor|dean|tenant|guard|security|desk|concierge|"
    r"superintendent|owner|host|neurologist|cardiologist|dermatologist|gp|midwife|"
    r"optometrist|psychiatrist|psychologist|allergist|orthopedist|surgeon|paramedic|"
    r"teammate|classmate|housemate|friend|buddy|mate|chef|waiter|steward|pilot|driver|"
    r"ex-girlfriend|ex-boyfriend|husband|kids?|child|children|niece|nephew|grandson|"
    r"granddaughter|mother-in-law|father-in-law|sister-in-law|brother-in-law|guardian)"
)
_REPORT_VERB = (
    r"(?:says?|said|reports?|reported|claims?|claimed|insists?|insisted|told|tells|mentions?|"
    r"mentioned|believes?|believed|thinks?|thought|recalls?|recalled|maintains?|maintained|"
    r"wrote|writes|confirms?|confirmed|argues?|argued|swears?|swore|remembers?|remembered|"
    r"states?|stated|notes?|noted|shows?|showed|shown|lists?|listed|indicates?|indicated|"
    r"records?|recorded|contains?|names?|named|reads?|gives?|gave|"
    r"describes?|described|assures?|assured|warned|advised|denies|denied|suggests?|suggested|"
    r"announced|announces|explained|explains|specifies|specified|requires|required|"
    r"marks|marked|flags|flagged|displays|displayed|estimates|estimated|prescribes|"
    r"prescribed|recommends|recommended|allows|allowed|permits|permitted|prohibits|"
    r"prohibited|forbids|authorizes|authorized|authorises|authorised|approves|approved)"
)
_SPEECH_VERB = (
    r"(?:says?|said|reports?|reported|claims?|claimed|insists?|insisted|told|tells|mentions?|"
    r"mentioned|believes?|believed|thinks?|thought|recalls?|recalled|maintains?|maintained|"
    r"swears?|swore|wrote|writes|texted|emailed|warned|assured|argues?|argued|explained|"
    r"informed|confirmed|confirms|promised|promises|called|recommended|recommends|approved|"
    r"advised|prescribed)"
)
_DET = r"(?:\b(?:[A-Z][\w'’&-]*(?:'s|’s)|his|her|their|my|our|the|a|an|its|this|that)\s+)"
# An appositive name: "the leasing agent, Bree, told ..." or "his neighbour Farah says ...".
_APPOS = (
    r"(?:,\s+(?:[A-Z][\w'’-]+)(?:\s+[A-Z][\w'’-]+)?,"
    r"|\s+[A-Z][a-z]+(?=\s+(?:says|said|told|claims|insists|reports)))?"
)
_AUX = (
    r"(?:\s+(?:has|have|had|also|still|now|since|repeatedly|already|clearly|recently|once|even))*"
)
_ACCORDING = re.compile(
    r"\b(?:[Aa]ccording to|[Aa]s per|[Bb]ased on|[Pp]er(?=\s+(?:the|his|her|their|[A-Z])))"
    r"\s+([^,.;]+)"
)
_FROM = re.compile(
    r"\b(?:an?|the|one)?\s*(?:[A-Z][a-z]+\s+)?(?:email|letter|message|text|note|memo|call|"
    r"voicemail|notice|reply)\s+from\s+((?:the\s+|his\s+|her\s+|their\s+|[A-Z][\w'’-]*(?:'s|’s)\s+)?"
    r"(?:[\w'’&-]+\s+){0,3}?[\w'’&-]+?)(?:,\s+[A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)?,)?\s+{v}\b".replace(
        "{v}", _REPORT_VERB
    ),
    re.I,
)
# Devices and documents also "log", "track" and "count".
_RECORD_VERB = _REPORT_VERB[:-1] + r"|logged|logs|tracked|tracks|counted|counts|measured)"
_SOURCE_RECORD = re.compile(
    rf"({_DET}(?:[\w'’&-]+\s+){{0,4}}?{_RECORD_NOUN}){_APPOS}{_AUX}\s+{_RECORD_VERB}\b",
    re.I,
)
_SOURCE_PERSON = re.compile(
    rf"({_DET}(?:[\w'’&-]+\s+){{0,3}}?{_PERSON_NOUN}){_APPOS}{_AUX}\s+{_SPEECH_VERB}\b",
    re.I,
)
_SOURCE_BARE = re.compile(
    rf"^((?:[A-Z][\w'’&-]*\s+){{0,3}}?(?:[A-Z]?[\w'’&-]+\s+){{0,2}}?{_RECORD_NOUN})"
    rf"{_AUX}\s+{_REPORT_VERB}\b",
    re.I,
)
_SOURCE_TITLED = re.compile(
    rf"((?:[A-Z]?[\w'’-]+\s+){{0,2}}{_PERSON_NOUN})\s+((?:[A-Z][\w'’-]+)(?:\s+[A-Z][\w'’-]+)?)"
    rf"{_AUX}\s+{_SPEECH_VERB}\b",
)
# What every _SOURCE_TITLED match contains: a cheap test that skips it on most texts.
_SPOKEN = re.compile(rf"\s{_SPEECH_VERB}\b")
# "The sleep clinic letter came: half a milligram ..."
_RECORD_COLON = re.compile(
    rf"({_DET}?(?:[\w'’&-]+\s+){{0,3}}?{_RECORD_NOUN})\s+(?:came|arrived|says|reads)?\s*:",
    re.I,
)
_SOURCE_NAMED = re.compile(
    rf"(?:^|[,;]\s+|\b(?:but|and|while|whereas)\s+)((?:[A-Z][a-z]+)(?:\s[A-Z][a-z]+)?)"
    rf"(?:,\s+(?:the|a|an|his|her|their)\s+[^,]{{2,40}},"
    rf"|\s+(?:from|at|of|in)\s+(?:the\s+)?[a-z]+(?:\s+[a-z]+)?)?{_AUX}\s+{_SPEECH_VERB}\b",
)

_CONTEXT = re.compile(
    r"\b((?:only\s+|just\s+|usually\s+|always\s+|mostly\s+)?"
    r"(?:when(?:ever)?|if|unless|on days (?:when|that|before|after)|"
    r"on (?:nights|mornings|evenings|weekends|weekdays|workdays|days off|school nights|"
    r"mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays)|"
    r"at (?:work|home|the office|parties|weddings|family|work events|client|restaurants|"
    r"the gym|night|school|church|dinner|business)|"
    r"during (?:work|the week|weekdays|weekends|exam|busy|crunch|holidays|the school year|term)|"
    r"while|around|in front of|"
    r"with (?:his|her|their|my) (?:\w+\s)?(?:peers|colleagues|friends|team|family|kids|"
    r"parents|boss|manager|supervisor|clients|in-laws|partner)|"
    r"for (?:work|business|client|team|family|date|formal|casual|long|short|quick|weekend|"
    r"weekday)|"
    r"before (?:a |an |big |early |important )|"
    r"on (?:a |an )?(?:work|school|game|race|exam|travel|rest|off|free|busy|heavy|light)"
    r"\s?\w*\s?days?)"
    r"[^,.;]*)",
    re.I,
)

_NAMEISH = re.compile(r"\b([A-Z][a-z]+)(?:'s|’s)?\b")
#: A role or kinship word ("Gran", "Mum", "Doctor"): never anyone's own name.
_ROLE_WORD = re.compile(_PERSON_NOUN, re.I)
#: Role words that are as often given names: they stay candidates for the user's name.
_ALSO_GIVEN_NAMES = frozenset({"Dean"})
#: Titles, and a title with the name it is given or a name with the honorific it takes
#: ("Mr Nakamura", "Dr. Osei", "Nakamura-san"); the title itself is never a name either.
_TITLES = frozenset({"Mr", "Mrs", "Ms", "Miss", "Mx", "Dr", "Prof", "Sir", "Dame", "Madam"})
_TITLED = re.compile(
    rf"\b(?:{'|'.join(sorted(_TITLES))})\.?\s+([A-Z][a-z]+)"
    r"|\b([A-Z][a-z]+)-(?:san|sama|sensei|kun|chan|ssi|nim|ji)\b"
)


@dataclass(frozen=True)
class TimeCue:
    """Time stated in a memory's text."""

    when: datetime | None
    """The earliest point in time the text names, if any."""
    duration: str | None
    """A stated duration (\"three weeks\"), if any."""
    spans: tuple[tuple[int, int], ...]
    """Character spans of the time expressions (to strip them from the value)."""


def split_sentences(text: str) -> list[str]:
    """Very small sentence splitter (enough for one-line memories and chat turns)."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])", text.strip())
    return [p.strip() for p in parts if p.strip()]


def content_words(text: str) -> list[str]:
    """Lowercase content words (3+ letters, not stopwords), light plural stripping."""
    out = []
    for w in re.findall(r"[a-zA-Z][a-zA-Z'-]+", text.lower()):
        w = w.strip("'-")
        if w.endswith("'s"):
            w = w[:-2]
        if len(w) < 3 or w in STOPWORDS or w in MONTHS or w in SEASONS:
            continue
        if len(w) > 4 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return out


#: The first person as the name counts (:func:`name_tokens`) read it: a capital "I" only. Those
#: counts decide which names are masked from similarities and values, which the shipped
#: weights were fitted with; :func:`in_own_words` (chat's "i" too) decides who "you" is.
_SPEAKER = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|My|me|myself)\b")


#: Calendar words are capitalised but never anyone's name (full month names only: "Jan" is a
#: name as often as a month).
_CALENDAR = (
    frozenset(m for m in MONTHS if len(m) > 3 or m == "may")
    | frozenset(SEASONS)
    | {
        d + s
        for d in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
        for s in ("", "s")
    }
)


def is_calendar_word(word: str) -> bool:
    """A month, weekday (or weekdays) or season, whatever its case: never a person."""
    return word.lower() in _CALENDAR


#: From this share of a user's texts in their own words ("I", "my") on, the texts are the
#: user's own account: any name frequent in them is someone or something the user talks
#: about, not the user (blind train split: such texts never carry the user's name, and a
#: lower bar took a provider, a child or a drug for the user in one chat in six).
OWN_WORDS_SHARE = 0.15


#: The user's own words: "I" (chat's lower-case "i" too, never "i.e."), "my", "me", "mine".
_FIRST_PERSON = re.compile(r"\b(?:I|[Ii]['’](?:m|ve|d|ll)|[Mm]y|me|mine|myself)\b|\bi\b(?!\.\w)")


def in_own_words(text: str) -> bool:
    """Whether ``text`` is told in the user's own words (the first person).

    Its "he" and "she" are then someone else, never the user: in "My mum is on warfarin and
    she takes 5 mg", the dose is the mother's.
    """
    return _FIRST_PERSON.search(text) is not None


def spoken_by_user(text: str) -> bool:
    """True for an account in the user's own words (first person, chat's lower-case "i"
    included, :func:`in_own_words`; not a question: a request to the assistant is not an
    account of anything)."""
    return in_own_words(text) and not text.rstrip().endswith("?")


def name_tokens(text: str) -> set[str]:
    """Capitalised tokens of one text (candidates for the user's own name).

    A text in the user's own words ("I", "my") names other people, firms and places, never
    the user: it offers no candidate (else a dentist or an internet provider mentioned in
    most of a user's chat turns would be taken for the user and written as "you"). Calendar
    words (months, weekdays, seasons) are never candidates, nor are roles written with a
    capital ("Gran's bungalow", "Mum said"): they name someone by their relation to the user.
    Nor is a name given a title or an honorific ("Mr Nakamura's stall", "Nakamura-san"): that
    is how the user's memories speak of someone else.
    """
    if _SPEAKER.search(text):
        return set()
    titled = {m.group(1) or m.group(2) for m in _TITLED.finditer(text)}
    return {
        m.group(1)
        for m in _NAMEISH.finditer(text)
        if not is_calendar_word(m.group(1))
        and (m.group(1) in _ALSO_GIVEN_NAMES or not _ROLE_WORD.fullmatch(m.group(1)))
        and m.group(1) not in titled
        and m.group(1) not in _TITLES
    }


def subject_names(texts: Iterable[str], min_share: float = 0.25, min_count: int = 2) -> set[str]:
    """Capitalised tokens frequent enough across one user's texts to be the user's own name.

    Such tokens carry no topical information (like a high document frequency in IDF), and
    they inflate every embedding similarity between that user's memories, so they are masked
    from similarities whoever they name. Whether they are the *user* (and may be written as
    "you") is :func:`user_names`'s call.
    """
    df: Counter[str] = Counter()
    n = 0
    for t in texts:
        df.update(name_tokens(t))
        n += 1
    return subject_from_counts(df, n, min_share, min_count)


def subject_from_counts(
    df: Counter[str], n: int, min_share: float = 0.25, min_count: int = 2
) -> set[str]:
    """:func:`subject_names` from kept document frequencies (incremental use)."""
    if not n:
        return set()
    need = max(min_count, int(min_share * n + 0.999))
    frequent = [(c, w) for w, c in df.items() if c >= need and w.lower() not in STOPWORDS]
    if not frequent:
        return set()
    # The user is the most frequent name; others (a sister, a doctor) are sources or topics.
    top = max(frequent)[0]
    return {w for c, w in frequent if c == top}


def user_names(subject: Iterable[str], n: int, spoken: int) -> set[str]:
    """Of the frequent names (:func:`subject_names`), the ones taken for the user: none when
    :data:`OWN_WORDS_SHARE` or more of the user's ``n`` texts are the user's own account
    (``spoken``, :func:`spoken_by_user`), where a frequent name is someone or something the
    user talks about (calendar words are never candidates, :func:`name_tokens`)."""
    if not n or spoken >= OWN_WORDS_SHARE * n:
        return set()
    return set(subject)


def user_names_of(texts: Iterable[str]) -> set[str]:
    """:func:`user_names` of ``texts`` (see :func:`subject_names`)."""
    texts = list(texts)
    return user_names(subject_names(texts), len(texts), sum(map(spoken_by_user, texts)))


def mask_names(text: str, names: set[str]) -> str:
    """Remove known subject names (and a sentence-initial possessive name) from ``text``."""
    out = text
    if names:
        pattern = r"\b(?:" + "|".join(re.escape(n) for n in sorted(names)) + r")(?:'s|’s)?\b"
        out = re.sub(pattern, " ", out)
    # A sentence-initial "Name's" is almost always the subject ("Maya's clinic record ...").
    out = re.sub(r"^\s*[A-Z][a-z]+(?:'s|’s)\s+", "", out)
    return re.sub(r"\s+", " ", out).strip()


def _year_hint(text: str) -> int | None:
    m = re.search(r"\b((?:19|20)\d{2})\b", text)
    return int(m.group(1)) if m else None


def find_time(text: str, default_year: int | None = None) -> TimeCue:
    """Dates and durations stated in ``text`` (absolute ones only; "last spring" is ignored)."""
    spans: list[tuple[int, int]] = []
    found: list[datetime] = []
    year_hint = _year_hint(text) or default_year

    def add(y: int, mth: int, d: int, span: tuple[int, int]) -> None:
        try:
            found.append(datetime(y, mth, d, tzinfo=timezone.utc))
            spans.append(span)
        except ValueError:
            pass

    for m in _ISO.finditer(text):
        add(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.span())
    for m in _MDY.finditer(text):
        add(int(m.group(3)), MONTHS[m.group(1).lower()[:3]], int(m.group(2)), m.span())
    for m in _DMY.finditer(text):
        add(int(m.group(3)), MONTHS[m.group(2).lower()[:3]], int(m.group(1)), m.span())
    if not found:
        for m in _MY.finditer(text):
            part = (m.group(1) or "").lower()
            day = 1 if part in ("", "early", "the start of", "the beginning of") else 15
            if part in ("late", "the end of"):
                day = 25
            add(int(m.group(3)), MONTHS[m.group(2).lower()[:3]], day, m.span())
        for m in _SEASON.finditer(text):
            add(int(m.group(3)), SEASONS[m.group(2).lower()], 1, m.span())
    if not found and year_hint is not None:
        for m in _MONTH_ONLY.finditer(text):
            part = (m.group(1) or "").lower()
            day = {"": 1, "early": 1, "mid": 15, "late": 25}.get(part, 1)
            add(year_hint, MONTHS[m.group(2).lower()[:3]], day, m.span())
    if not found:
        for m in _YEAR.finditer(text):
            add(int(m.group(1)), 1, 1, m.span())
    duration = None
    dm = _DURATION.search(text)
    if dm:
        duration = dm.group(1).lower()
        spans.append(dm.span())
    return TimeCue(min(found) if found else None, duration, tuple(spans))


def duration_days(duration: str | None) -> float | None:
    """Rough length in days of a duration string such as ``"three weeks"``."""
    if not duration:
        return None
    m = re.match(
        r"(\d+|[a-z ]+?)\s+(?:straight\s+|full\s+|more\s+)?(day|week|month|year|weekend)s?$",
        duration,
    )
    if not m:
        return None
    raw = m.group(1).strip()
    n = int(raw) if raw.isdigit() else NUMBER_WORDS.get(raw, 1)
    unit = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}[m.group(2)]
    return float(n * unit)


_RELATIVE_TIME = re.compile(
    r"\b(this|last|past|previous|next) (week|month|year|spring|summer|fall|autumn|winter|"
    r"semester|term|quarter)\b|\b(lately|these days|recently|nowadays|so far|anymore|"
    r"any more|for the past|for a while|at the moment|currently|right now)\b|"
    r"\bsince (the|last|early|mid|late|january|february|march|april|may|june|july|august|"
    r"september|october|november|december|\d)",
    re.I,
)


def has_time_cue(text: str) -> bool:
    """The text places itself in time ("this month", "lately", "since March", "for weeks")."""
    return bool(_RELATIVE_TIME.search(text))


def has_return_cue(text: str) -> bool:
    """The text says a behaviour went back to an earlier state."""
    return bool(_RETURN.search(text))


def has_change_cue(text: str) -> bool:
    """The text says a state changed (moved, quit, switched, no longer, ...)."""
    return bool(_CHANGE.search(text))


def find_source(text: str, subject: set[str] | None = None) -> str | None:
    """Who or what asserts the statement, when the text names it.

    Returns ``None`` for plain statements (the user's own report). A subject's own name as
    the reporter ("Ethan says ...") counts as a self-report.
    """
    subject = subject or set()
    m = _ACCORDING.search(text)
    if m:
        return _clean_source(m.group(1))
    m = _FROM.search(text)
    if m:
        who = m.group(1)
        if not find_time(who).when and not re.search(r"\b(?:19|20)\d{2}\b|" + _MONTH_RE, who, re.I):
            return _clean_source(who)
        # "a GP note from January 2025 says": the note is the source, not the date.
        return _clean_source(text[m.start() : m.start(1)].strip().removesuffix("from").strip())
    candidates = []
    # "The school letter says: ..." needs a colon, "her mother Ana insists" a speech verb;
    # without them those patterns (the slowest here, their noun phrases retried at every
    # word) cannot match and are not run.
    patterns = [_SOURCE_RECORD, _SOURCE_PERSON, _SOURCE_BARE]
    if _SPOKEN.search(text):
        patterns.append(_SOURCE_TITLED)
    if ":" in text:
        patterns.append(_RECORD_COLON)
    for rx in patterns:
        m = rx.search(text)
        if m:
            src = _clean_source(m.group(1))
            if src and src.lower() not in ("he", "she", "they", "i", "it", "this", "that"):
                candidates.append((m.start(1), src))
    if candidates:
        # The first source named; of two readings that start there, the longer noun phrase
        # ("Priya's GP record says" is the record, not a person "Priya's GP" with an
        # appositive "record").
        return min(candidates, key=lambda c: (c[0], -len(c[1])))[1]
    m = _SOURCE_NAMED.search(text)
    if m:
        name = m.group(1)
        if name.split()[0] in subject:
            return "self-report"
        if name.lower() not in STOPWORDS and name not in ("The", "A", "An", "In", "On"):
            return name
    return _pronoun_source(text, subject)


_PRONOUN_REPORT = re.compile(rf"\b(?:[Ss]he|[Hh]e|[Tt]hey|[Ii]t)(?:'s)?{_AUX}\s+{_RECORD_VERB}\b")
_RECORD_NP = re.compile(rf"({_DET}(?:[\w'’&-]+\s+){{0,3}}?{_RECORD_NOUN})\b", re.I)


def _pronoun_source(text: str, subject: set[str]) -> str | None:
    """ "Asked Inés about it. She says ..." / "I read my file. It says ...": the pronoun's
    antecedent in the sentence before is the source."""
    sentences = split_sentences(text)
    for prev, cur in pairwise(sentences):
        if not _PRONOUN_REPORT.search(cur):
            continue
        record = _RECORD_NP.search(prev)
        names: list[str] = [
            str(w)
            for w in re.findall(r"\b([A-Z][a-zà-ÿ]+)\b", prev[1:])
            if w not in subject and w.lower() not in STOPWORDS and w.lower() not in MONTHS
        ]
        if names:
            return names[-1]
        if record:
            return _clean_source(record.group(1))
    return None


def _clean_source(raw: str) -> str:
    s = re.sub(r"\s+", " ", raw).strip(" ,;:")
    s = re.sub(r"^(?:that|and|but)\s+", "", s, flags=re.I)
    return s


_RECORD_SOURCE = re.compile(rf"\b{_RECORD_NOUN}$|\bofficial\b|\bcourt\b", re.I)


def is_record_source(source: str) -> bool:
    """A written or logged source (a record, a log, an app) rather than a person's account."""
    return bool(_RECORD_SOURCE.search(source.strip()))


@functools.lru_cache(maxsize=65536)
def normalize_source(source: str) -> str:
    """Comparable form of a source: lowercase, without the owner's possessive and articles."""
    s = source.lower().replace("’", "'")
    s = re.sub(r"^(?:[a-z]+'s|his|her|their|my|our|the|a|an)\s+", "", s)
    s = re.sub(r"^(?:[a-z]+'s)\s+", "", s)
    return s.strip()


def find_context(text: str) -> str | None:
    """The condition clause under which the statement holds ("when the next day is off")."""
    text = re.sub(r"\b([ap])\.m\.", r"\1m", text)
    for m in _CONTEXT.finditer(text):
        clause = m.group(1).strip()
        # A time expression is not a context: "when he was in Lisbon in March 2025" still is,
        # but "during March" is not.
        if re.fullmatch(
            rf"(?:during|while|around)\s+(?:early |mid |late )?{_MONTH_RE}.*", clause, re.I
        ):
            continue
        if len(clause.split()) < 2:
            continue
        return clause
    return None


_LEAD_PREP = re.compile(r"(?:\b(?:in|from|during|since|by|on|through|until|throughout)\s+)$", re.I)


def widen_spans(text: str, spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Grow time spans over the preposition that introduces them ("in", "from", "during")."""
    out = []
    for a, b in spans:
        m = re.search(
            r"(?:\b(?:in|from|during|since|by|on|through|until|throughout)\s+)$", text[:a], re.I
        )
        out.append((m.start() if m else a, b))
    return out


def strip_spans(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with the given character spans removed."""
    out, last = [], 0
    for a, b in sorted(spans):
        if a < last:
            continue
        out.append(text[last:a])
        last = b
    out.append(text[last:])
    return re.sub(r"\s+", " ", "".join(out)).strip(" ,;")
