"""Screen a lesson for text that addresses the system instead of describing the trade.

A lesson is model output about one trade ("Role momentum (late_entry): went long after
the move ..."). Text that instead tells the system what to do — ignore or override its
rules, admit or quarantine trades, change permissions or the memory mode, call tools —
is an injection attempt whatever its intent, and a lesson is recalled into later
prompts, so it is held for review (`CaseState.HELD`, `lesson_reviews`) and never
recalled until a reviewer accepts it.

The screen is deliberately conservative and explainable: a handful of named patterns
over the NFKC-normalised, case-folded text with invisible characters removed, each
naming what it found. A false positive costs a review; a false negative is still only
ever shown inside the data-only section of a prompt (`reflexmem.runtime.prompt`). The
patterns were written by hand from the instruction-injection phrasings the issue and
the tests name and checked against every lesson the rule reflector can word; no test
split informed them.
"""

from __future__ import annotations

import re
import unicodedata

INVISIBLE = re.compile(r"[\u200b-\u200f\u2028-\u202f\u2060-\u206f\ufeff\u00ad]")

PATTERNS: dict[str, re.Pattern[str]] = {
    "override_instructions": re.compile(
        r"\b(ignore|disregard|forget|override|bypass|circumvent|disable|skip|suspend|lift)\b"
        r"[\w\s,'\"-]{0,40}?\b(rules?|instructions?|prompts?|guard ?rails?|guards?|checks?|"
        r"constraints?|polic(y|ies)|safety|restrictions?|limits?|expectations?)\b"
    ),
    "admission_or_quarantine": re.compile(
        r"\b(admit|admits|admitted all|admission|quarantine|quarantined|unquarantine|"
        r"eligib(le|ility) (of|for) (all|every|any))\b"
    ),
    "permissions_or_mode": re.compile(
        r"\b(permissions?|privileges?|access rights?|role_memory_mode|memory mode|"
        r"(active|shadow) mode|grant(ed)? (access|yourself)|sudo|root access|whitelist|allowlist)\b"
    ),
    "tools_or_actions": re.compile(
        r"\b(tools?|tool[_ ]calls?|function[_ ]calls?|place_order|modify_order|cancel_order|"
        r"move_funds|transfer funds|withdraw funds|api[_ ]keys?|credentials?|passwords?|"
        r"run (the|this|a) (command|script|code)|execute (the|this|a|all))\b"
    ),
    "addresses_the_model": re.compile(
        r"(\byou (must|should|will|are to|need to|have to)\b|\bas an? (ai|assistant|"
        r"language model)\b|\bfrom now on\b|\bnew instructions?\b|\bsystem prompt\b|"
        r"^\s*(system|assistant|user)\s*:|<\|?(im_start|system)\|?>)"
    ),
}
"""Rule name -> pattern; a lesson matching any of them is held for review."""


def normalise(text: str) -> str:
    """NFKC, invisible characters removed, case-folded: what the patterns read."""
    return INVISIBLE.sub("", unicodedata.normalize("NFKC", text)).casefold()


def addresses_system(text: str | None) -> tuple[str, ...]:
    """The names of the patterns `text` matches, with the matched words; empty if none."""
    if not text:
        return ()
    clean = normalise(text)
    found = []
    for name, pattern in PATTERNS.items():
        hit = pattern.search(clean)
        if hit is not None:
            found.append(f"{name}: {hit.group(0).strip()!r}")
    return tuple(found)
