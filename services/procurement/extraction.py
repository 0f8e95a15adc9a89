"""Fields read from a request's free text: quantity and unit, delivery date, cost
center and contract term.

Regular expressions, not a model: these fields have a few written forms ("12
monitors", "qty: 20", "by 2026-01-05", "before 15 December 2026", "cost centre
5120", "CC-4410"), and a missed field costs nothing (the field is absent), while a
wrong one misleads the approver. So every pattern needs context: a quantity counts
something from a known list of units, a date needs a delivery cue before it, a term
needs "term", "subscription" or "for" around it. Values are normalized (ISO dates,
digits without separators, ``CC-`` cost centers) so downstream code compares them.
"""

from __future__ import annotations

import datetime as dt
import re

_UNIT_LIST = """
    laptop notebook desktop workstation monitor screen display dock docking-station
    keyboard mouse mice headset phone smartphone tablet printer scanner server switch
    router module drive kit cable camera bar chair desk cabinet locker machine
    license licence seat user endpoint device unit piece item box pallet roll copy
    brochure flyer poster hoodie t-shirt shirt bottle bag mug sticker badge
    hour day week night ticket room person people session interview word page
    consultant contractor accountant auditor engineer developer manager staff webinar space m2
"""
_UNITS = _UNIT_LIST.split()
_IRREGULAR = {
    "mouse": "mice",
    "person": "people",
    "copy": "copies",
    "switch": "switches",
    "box": "boxes",
    "staff": "staff",
    "people": "people",
    "mice": "mice",
    "m2": "m2",
}


def _forms(unit: str) -> list[str]:
    regular = unit[:-1] + "ies" if re.search(r"[^aeiou]y$", unit) else unit + "s"
    plural = _IRREGULAR.get(unit, regular)
    return sorted({unit, plural, unit.replace("-", " "), plural.replace("-", " ")})


_UNIT = "|".join(sorted({f for u in _UNITS for f in _forms(u)}, key=len, reverse=True))
_NUMBER = r"\d{1,3}(?:,\d{3})+|\d+"
# A number, an optional "x", up to two words describing the thing, and the unit:
# "12 27-inch monitors", "16 DIMM modules", "60 developer seats", "5x laptops". The
# number stands alone ("48-port switches" counts ports of a switch, not switches), and
# the last unit word of the phrase wins ("60 developer seats" are seats).
_QUANTITY = re.compile(
    rf"(?<![\w.,/-])({_NUMBER})(?:\s*x)?\s+(?:[a-z0-9\"'-]+\s+){{0,2}}({_UNIT})\b",
    re.IGNORECASE,
)
_EXPLICIT_QUANTITY = re.compile(
    rf"\b(?:qty|quantity)\s*[:=]?\s*({_NUMBER})\b(?:(?:\s*x)?\s+(?:[a-z0-9\"'-]+\s+){{0,3}}"
    rf"({_UNIT})\b)?",
    re.IGNORECASE,
)
_MONEY_BEFORE = re.compile(r"(?:[$€£]|\b(?:eur|usd|gbp|chf))\s*$", re.IGNORECASE)

_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DATE = (
    rf"(?P<iso>\d{{4}}-\d{{2}}-\d{{2}})"
    rf"|(?P<dmy>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<dmy_month>{_MONTH})\.?,?\s+(?P<dmy_year>\d{{4}})"
    rf"|(?P<mdy_month>{_MONTH})\.?\s+(?P<mdy>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<mdy_year>\d{{4}})"
)
_DELIVERY_CUE = (
    r"(?:deliver(?:y|ed)?(?:\s+date)?(?:\s+(?:by|on|before))?|needed\s+(?:by|on|before)|"
    r"required\s+(?:by|on|before)|no\s+later\s+than|on\s+or\s+before|due(?:\s+(?:by|on))?|"
    r"by|before|until)"
)
_DELIVERY_DATE = re.compile(rf"\b{_DELIVERY_CUE}\s*:?\s*(?:{_DATE})", re.IGNORECASE)

_COST_CENTER = re.compile(
    r"(?:\bcost[\s-]*cent(?:er|re)\b(?:\s+(?:code|no\.?|number))?\s*[:#]?\s*"
    r"(?P<named>[A-Z]{1,4}-\d{2,6}|\d{2,6})"
    r"|\bCC[\s#:-]*(?P<short>\d{2,6})\b)",
    re.IGNORECASE,
)

_NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "twelve": 12,
    "eighteen": 18,
    "twenty-four": 24,
    "thirty-six": 36,
}
_TERM_NUMBER = r"\d{1,2}|" + "|".join(_NUMBER_WORDS)
_TERM = re.compile(
    rf"(?:\bfor\s+(?:another\s+|a\s+further\s+)?(?P<for_n>{_TERM_NUMBER})[\s-]+(?P<for_unit>month|year)s?\b"
    rf"|\b(?P<n>{_TERM_NUMBER})[\s-]+(?P<unit>month|year)s?[\s-]+"
    r"(?:term|subscription|contract|agreement|licen[cs]e|renewal|lease|retainer)\b)",
    re.IGNORECASE,
)


def extract_fields(text: str) -> dict[str, str]:
    """The fields found in ``text``; a field not found is absent, never guessed.

    Keys: ``quantity`` (digits) and ``unit`` (as written, lower case), ``delivery_date``
    (ISO), ``cost_center`` (``CC-4410``, or a named one as written: ``MKT-220``) and
    ``contract_term`` (``12 months``, ``3 years``).
    """
    fields: dict[str, str] = {}
    quantity = _quantity(text)
    if quantity is not None:
        fields["quantity"], unit = quantity
        if unit:
            fields["unit"] = unit
    delivery = _delivery_date(text)
    if delivery is not None:
        fields["delivery_date"] = delivery.isoformat()
    cost_center = _cost_center(text)
    if cost_center is not None:
        fields["cost_center"] = cost_center
    term = _contract_term(text)
    if term is not None:
        fields["contract_term"] = term
    return fields


def _quantity(text: str) -> tuple[str, str] | None:
    explicit = _EXPLICIT_QUANTITY.search(text)
    if explicit is not None:
        return explicit.group(1).replace(",", ""), (explicit.group(2) or "").lower()
    for match in _QUANTITY.finditer(text):
        if _MONEY_BEFORE.search(text[max(0, match.start() - 5) : match.start()]):
            continue  # "EUR 300 licenses" is a price, not a count
        return match.group(1).replace(",", ""), match.group(2).lower()
    return None


def _delivery_date(text: str) -> dt.date | None:
    for match in _DELIVERY_DATE.finditer(text):
        date = _date(match)
        if date is not None:
            return date
    return None


def _date(match: re.Match[str]) -> dt.date | None:
    try:
        if match.group("iso"):
            return dt.date.fromisoformat(match.group("iso"))
        if match.group("dmy"):
            day, month, year = match.group("dmy", "dmy_month", "dmy_year")
        else:
            month, day, year = match.group("mdy_month", "mdy", "mdy_year")
        return dt.date(int(year), _MONTHS[month.lower()], int(day))
    except ValueError:  # 2026-02-30 and the like: not a date, so not a delivery date
        return None


def _cost_center(text: str) -> str | None:
    match = _COST_CENTER.search(text)
    if match is None:
        return None
    value = (match.group("named") or match.group("short")).upper()
    return f"CC-{value}" if value.isdigit() else value


def _contract_term(text: str) -> str | None:
    match = _TERM.search(text)
    if match is None:
        return None
    number = match.group("for_n") or match.group("n")
    unit = (match.group("for_unit") or match.group("unit")).lower()
    count = int(number) if number.isdigit() else _NUMBER_WORDS[number.lower()]
    return f"{count} {unit}{'s' if count != 1 else ''}"
