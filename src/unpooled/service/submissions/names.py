"""Names people choose and others read -- team names, user names, run ids, descriptions: no control or invisible
characters, one script per name, and no team name that looks like another team's or the human reference's.

Security review N9 (a team "ТeamA" with a Cyrillic Т beside "TeamA", zero-width and right-to-left characters, a name
imitating "[human reference]" on the public leaderboard) and N10 (terminal escapes in a run id reaching the
organiser's terminal through the command line).
"""

from __future__ import annotations

import unicodedata

#: categories never accepted in a name: controls, invisible formatting (zero-width, bidi), line and paragraph
#: separators, private-use, surrogates and unassigned code points
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"}
#: scripts whose letters pass for Latin ones: a name mixing two of them imitates another
_CONFUSABLE_SCRIPTS = {"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC"}
#: Cyrillic and Greek letters that look like Latin ones (Unicode's confusables, letters only), for the skeleton
_LOOKALIKE = str.maketrans({
    **dict(zip("авсеһіјкмнорѕтхуԁԛԝѡӏ", "abcehijkmhopstxydqwwl")),
    **dict(zip("АВСЕНІЈКМОРЅТХУ", "abcehijkmopstxy")),
    **dict(zip("αβεικνορτυχω", "abeikvoptuxw")),
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "abezhikmnoptyx")),
})


def hidden_character(text: str, *, multiline: bool = False) -> str | None:
    """Where ``text`` holds a character no reader sees as written (a control, an invisible or direction-changing
    one; a space other than U+0020), or ``None``.  ``multiline``: line feeds and tabs are allowed."""
    for i, ch in enumerate(text, 1):
        if multiline and ch in "\n\t":
            continue
        cat = unicodedata.category(ch)
        if cat in _HIDDEN or (cat == "Zs" and ch != " "):
            what = unicodedata.name(ch, "a control character").lower()
            return f"character {i} is {what} (U+{ord(ch):04X}), which readers would not see as written"
    return None


def description_problem(text: str | None) -> str | None:
    """Why ``text`` may not describe a run (``None``: it may): lines and tabs, but nothing hidden."""
    why = hidden_character(text or "", multiline=True)
    return f"description: {why}" if why else None


def _scripts(text: str) -> set[str]:
    return {unicodedata.name(ch, "").split(" ")[0] for ch in text if ch.isalpha()} & _CONFUSABLE_SCRIPTS


def name_problem(name: str, field: str) -> str | None:
    """Why ``name`` may not name a team, a user or a run (``None``: it may), prefixed by ``field``."""
    why = hidden_character(name)
    if why:
        return f"{field}: {why}"
    scripts = _scripts(name)
    if len(scripts) > 1:
        return (f"{field}: {name!r} mixes {' and '.join(sorted(s.title() for s in scripts))} letters, which can "
                "imitate another name; use one alphabet")
    return None


def skeleton(name: str) -> str:
    """What ``name`` looks like: compatibility-normalised, case-folded, look-alike letters mapped to Latin ones."""
    return unicodedata.normalize("NFKC", name).casefold().translate(_LOOKALIKE)


def looks_like(name: str, others) -> str | None:
    """The first of ``others`` that ``name`` looks like without being the same name (case aside), or ``None``."""
    mine, folded = skeleton(name), name.casefold()
    return next((o for o in others if skeleton(o) == mine and o.casefold() != folded), None)


def new_team_problem(name: str) -> str | None:
    """Why a new team may not be named ``name`` (``None``: it may): a hidden character, mixed alphabets, or a name
    that looks like an existing team's or the human reference's."""
    from .models import REFERENCE_TEAM, Team

    why = name_problem(name, "team")
    if why:
        return why
    if skeleton(name) == skeleton(REFERENCE_TEAM):
        return f"team: {REFERENCE_TEAM!r} is reserved for the human reference"
    other = looks_like(name, Team.objects.values_list("name", flat=True).iterator())
    if other is not None:
        return f"team: {name!r} looks like the existing team {other!r}; choose a name readers can tell apart"
    return None
