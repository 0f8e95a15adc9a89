"""Tokens of free text, shared by the classifier and the retriever.

Both learn from a few dozen short documents, so the tokenizer does the work a larger
corpus would do by itself: it drops words that carry no topic ("please", "the"),
and folds plurals and -ing forms together ("laptops" and "laptop", "licenses"
and "license") with a deliberately small suffix stripper. A real stemmer
would do better on a large vocabulary; on this one it mostly adds surprises.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z][a-z0-9]*(?:[-'][a-z0-9]+)*")

_STOPWORD_LIST = """
    a about above after again all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few
    for from further had has have having he her here hers him his how i if in into is
    it its itself just me more most my no nor not now of off on once only or other our
    ours out over own per please same she should so some such than that the their them
    then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours need needed
    needs want new next get like use used using via etc each one two three four five
"""
STOPWORDS = frozenset(_STOPWORD_LIST.split())


def stem(word: str) -> str:
    """Fold a word's plural and -ing forms onto one stem ("licenses", "license" -> "licens")."""
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    elif word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def tokens(text: str) -> list[str]:
    """Lower-cased, stop-word-free, stemmed words of ``text`` in order (numbers dropped)."""
    return [
        stem(word)
        for word in _WORD.findall(text.lower().replace("\u2019", "'"))
        if word not in STOPWORDS and len(word) > 1
    ]
