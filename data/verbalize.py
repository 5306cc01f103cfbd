"""Spoken form of a written transcript word, for the forced aligner.

A forced aligner can only place words it can pronounce. "$1,250" or "3/4/2021" has no CMUdict entry,
and espeak's guess for a digit string is one long "word" that rarely matches what a person said.
`verbalize(token)` turns one display token
(a whitespace-separated piece of the transcript, punctuation included) into the words a speaker most
likely says: "$1,250" → "one thousand two hundred fifty dollars", "Dr." → "doctor", "FBI" → "f b i".

Choices (one form per token, the most common reading; speakers who say another form still align,
the aligner just gets slightly wrong phones for that word):
- Numbers are American style without "and" ("one thousand two hundred fifty"); a bare 4-digit
  number between 1100 and 2099 is read as a year ("nineteen ninety nine", "fifteen hundred"), which
  is also how people say a round count like 1500.
- Only the token itself is looked at, never its neighbours: data.synth checks every token's
  `normalize_word` against `transcript_words`, so the two must agree. That rules out readings that
  depend on the next word ("St. Louis" vs "Main St." → always "saint"; "March 3" → "three").
- An all-caps word is spelled out when it is said as letters: CMUdict's own entry is its letters
  ("FBI", "HTML"), or it is not in CMUdict and short or vowel-less ("NBC", "CEO"). Words CMUdict
  pronounces as a word stay ("NASA", and "US"/"IT", which all-caps LibriSpeech text is full of).
- Non-ASCII letters are folded (NFKD: "Zürich" → "zurich"); scripts with no ASCII fold say nothing.
- Tokens without a spoken form (dashes, quotes) give "" and data.text glues them to the previous word.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from pathlib import Path

from num2words import num2words

# Spoken forms of abbreviations, keyed by the lowercase token as written (with its period when it has one).
ABBREVIATIONS: dict[str, str] = {
    "mr.": "mister", "mr": "mister", "mrs.": "missus", "mrs": "missus", "ms.": "miz", "ms": "miz",
    # CMUdict reads "dr"/"st" as "drive"/"street"; before a name (the common case) they are titles.
    "dr.": "doctor", "dr": "doctor", "st.": "saint", "st": "saint", "jr.": "junior", "sr.": "senior",
    "prof.": "professor", "gen.": "general", "gov.": "governor", "sen.": "senator", "rep.": "representative",
    "rev.": "reverend", "capt.": "captain", "lt.": "lieutenant", "col.": "colonel", "sgt.": "sergeant",
    "hon.": "honorable", "mt.": "mount", "ave.": "avenue", "blvd.": "boulevard", "rd.": "road",
    "etc.": "et cetera", "etc": "et cetera", "&c.": "et cetera", "vs.": "versus", "vs": "versus",
    "approx.": "approximately", "dept.": "department",
    "inc.": "incorporated", "ltd.": "limited", "corp.": "corporation", "co.": "company", "fig.": "figure",
    "vol.": "volume", "ch.": "chapter", "ft.": "feet", "lbs.": "pounds", "oz.": "ounces",
    "jan.": "january", "feb.": "february", "mar.": "march", "apr.": "april", "jun.": "june", "jul.": "july",
    "aug.": "august", "sep.": "september", "sept.": "september", "oct.": "october", "nov.": "november",
    "dec.": "december", "mon.": "monday", "mon": "monday", "tue.": "tuesday", "tues.": "tuesday",
    "wed.": "wednesday", "thu.": "thursday", "thurs.": "thursday", "fri.": "friday", "fri": "friday",
    "apt.": "apartment", "pm": "p m", "km/h": "kilometers per hour", "km": "kilometers", "kg": "kilograms",
    "cm": "centimeters", "mm": "millimeters",
    "mph": "miles per hour", "kph": "kilometers per hour", "lbs": "pounds", "oz": "ounces",
}
# A number's unit written right after it ("5km", "16GB"); lowercase keys.
UNITS: dict[str, str] = {
    "km": "kilometers", "kg": "kilograms", "cm": "centimeters", "mm": "millimeters", "m": "meters",
    "g": "grams", "mg": "milligrams", "ml": "milliliters", "l": "liters", "lb": "pounds", "lbs": "pounds",
    "oz": "ounces", "ft": "feet", "mi": "miles", "mph": "miles per hour", "kph": "kilometers per hour",
    "kmh": "kilometers per hour", "gb": "gigabytes", "mb": "megabytes", "kb": "kilobytes", "tb": "terabytes",
    "ghz": "gigahertz", "mhz": "megahertz", "hz": "hertz", "kw": "kilowatts", "kwh": "kilowatt hours",
    "x": "times", "s": "seconds", "h": "hours", "min": "minutes",
}
# Symbols that are said: alone ("&"), or inside a token ("AT&T", "C++").
SYMBOLS: dict[str, str] = {
    "&": "and", "%": "percent", "+": "plus", "@": "at", "#": "number", "=": "equals", "°": "degrees",
    "×": "times", "±": "plus or minus", "$": "dollars", "€": "euros", "£": "pounds", "¢": "cents",
    "¥": "yen", "₹": "rupees",
}
CURRENCIES: dict[str, tuple[str, str, str, str]] = {  # symbol → unit, units, subunit, subunits
    "$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"), "¥": ("yen", "yen", "", ""), "₹": ("rupee", "rupees", "paisa", "paise"),
}
SCALES = {"k": "thousand", "m": "million", "mn": "million", "b": "billion", "bn": "billion", "t": "trillion"}
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
# Top-level domains that make "word.tld" a web address (not ones that are also words: "it", "in", "me").
TLDS = frozenset("com org net edu gov mil io co uk de fr nl eu ca au nz jp cn ru ai app dev info biz tv ly xyz".split())
# Letters NFKD does not decompose into ASCII.
_FOLD = str.maketrans({"ß": "ss", "æ": "ae", "Æ": "AE", "ø": "o", "Ø": "O", "œ": "oe", "Œ": "OE", "ł": "l",
                       "Ł": "L", "đ": "d", "Đ": "D", "ð": "d", "þ": "th", "Þ": "TH", "ı": "i",
                       "\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"',
                       "\u2013": "-", "\u2014": "--", "\u2212": "-", "\u2044": "/"})
_OPEN = "\"'([{<«*_"
_CLOSE = "\"')]}>»,;:!?*_."
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
_ROMAN = re.compile(r"X{0,3}(IX|IV|V?I{0,3})")
_DIGIT_WORDS = "zero one two three four five six seven eight nine".split()


@lru_cache(maxsize=1)
def lexicon() -> dict[str, str]:
    """CMUdict as shipped with pocketsphinx (the default aligner's dictionary): word → first pronunciation."""
    try:
        from pocketsphinx import get_model_path
    except ImportError:  # no aligner dictionary: acronyms fall back to the length rule
        return {}
    entries: dict[str, str] = {}
    with open(Path(get_model_path()) / "en-us" / "cmudict-en-us.dict", encoding="utf-8") as fh:
        for line in fh:
            word, _, phones = line.strip().partition(" ")
            if "(" not in word:
                entries.setdefault(word, phones)
    return entries


def fold(text: str) -> str:
    """ASCII letters for accented/foreign ones; typographic quotes and dashes to ASCII; symbols kept."""
    text = unicodedata.normalize("NFKD", text).translate(_FOLD)
    return "".join(ch for ch in text if ch.isascii() or ch in SYMBOLS)


@lru_cache(maxsize=65536)
def verbalize(token: str) -> str:
    """Space-separated spoken words of one transcript token ('' when nothing in it is said)."""
    spoken = " ".join(_token(fold(token))).split()  # entries may hold several words ("et cetera")
    words = (re.sub(r"-{2,}", "-", re.sub(r"[^a-z'-]+", "", w.lower())).strip("'-") for w in spoken)
    return " ".join(w for w in words if w)


def cardinal(n: int) -> str:
    return _clean_num(num2words(n))


def ordinal(n: int) -> str:
    return _clean_num(num2words(n, to="ordinal"))


def year(n: int) -> str:
    """1999 → nineteen ninety nine, 2005 → two thousand five, 1905 → nineteen oh five."""
    return _clean_num(num2words(n, to="year"))


def number(text: str) -> str:
    """A written number ("1,250", "3.14", ".5", "1999") as words; 4-digit 1100–2099 read as a year."""
    whole, _, frac = text.replace(",", "").partition(".")
    if len(whole) > 1 and whole.startswith("0") and not frac or len(whole) > 15:  # "007", ids: digit by digit
        return digits(whole)
    if not frac and "," not in text and len(whole) == 4 and 1100 <= int(whole) <= 2099:
        return year(int(whole))
    words = cardinal(int(whole or "0")) if whole or not frac else ""
    return f"{words} point {digits(frac)}".strip() if frac else words


def digits(text: str, zero: str = "zero") -> str:
    return " ".join(zero if d == "0" else _DIGIT_WORDS[int(d)] for d in text if d.isdigit())


def _clean_num(words: str) -> str:
    # num2words writes "one thousand, two hundred and fifty", "twenty-one": American, one word per piece.
    return " ".join(w for w in re.split(r"[\s,-]+", words) if w and w != "and")


def _plural(words: str) -> str:
    """'nineteen ninety' → 'nineteen nineties' (decades)."""
    head, _, last = words.rpartition(" ")
    last = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return f"{head} {last}".strip()


def _token(tok: str) -> list[str]:
    core = tok.lstrip(_OPEN)
    stripped = core.rstrip(_CLOSE)
    tail = core[len(stripped):]
    if not stripped:
        return [SYMBOLS[ch] for ch in core if ch in SYMBOLS]
    if tail.startswith(".") and (stripped + ".").lower() in ABBREVIATIONS:
        return [ABBREVIATIONS[(stripped + ".").lower()]]
    # Dotted initialisms are spelled: U.S., a.m., and also i.e./e.g. (readers say "i e").
    if tail.startswith(".") and re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", stripped):
        return stripped.lower().split(".")
    return _core(stripped)


def _core(t: str) -> list[str]:
    low = t.lower()
    if low in ABBREVIATIONS:
        return [ABBREVIATIONS[low]]
    if m := re.fullmatch(r"([\w.+-]+)@([\w-]+(?:\.[\w-]+)+)", t):  # e-mail address
        return [*_dotted(re.split(r"[._+-]+", m.group(1))), "at", *_dotted(m.group(2).split("."))]
    if m := re.fullmatch(r"(?:https?://)?((?:[\w-]+\.)+([A-Za-z]{2,}))(/\S*)?", t, re.I):
        if m.group(2).lower() in TLDS:  # "example.com" → example dot com; the scheme is not read out
            path = [re.findall(r"[A-Za-z]+|\d+", seg) for seg in (m.group(3) or "").strip("/").split("/") if seg]
            return [*_dotted(m.group(1).split(".")), *(w for seg in path for w in ("slash", *_dotted(seg, "")))]
    for rule in _NUMBER_RULES:
        if (m := rule[0].fullmatch(t)) is not None:
            return rule[1](m).split()
    # Glued pieces: split on separators and say each piece.
    for sep, joiner in (("&", "and"), ("+", "plus"), ("/", None), ("--", None), ("_", None)):
        if sep in t and t != sep:  # "AT&T", "C++", "and/or", "word--word"
            pieces = re.split(f"({re.escape(sep)})", t)
            return [w for p in pieces if p for w in ([joiner] if p == sep and joiner else [] if p == sep else _token(p))]
    if t[0] in "$€£¥₹" and len(t) > 1:  # "$5-10", "€2.5k": the amount, then the currency
        return [*_token(t[1:]), CURRENCIES[t[0]][1]]
    if t[-1] in "%°¢" and len(t) > 1:
        return [*_token(t[:-1]), SYMBOLS[t[-1]]]
    if t[0] in "#@" and len(t) > 1:  # "#1" → number one, "#MeToo" → hashtag me too, "@jane" → at jane
        word = "number" if t[1].isdigit() else "hashtag" if t[0] == "#" else "at"
        return [word, *(w for p in re.findall(r"[A-Z]?[a-z']+|[A-Z]+(?![a-z])|\d+", t[1:]) for w in _token(p))]
    if "-" in t.strip("-") and re.search(r"[^A-Za-z'-]", t):  # "COVID-19", "5-year-old"
        return [w for p in t.split("-") if p for w in _token(p)]
    if "." in t.strip("."):  # "Ph.D", "end.Start"
        return _dotted([p for p in t.split(".") if p], joiner="")
    if re.search(r"\d", t) and re.fullmatch(r"[A-Za-z0-9]+", t):  # "MP3", "4K", "x86", "COVID19"
        return [w for p in re.findall(r"[A-Za-z]+|\d+", t)
                for w in (number(p).split() if p.isdigit() else list(p.lower()) if p.isupper() and len(p) <= 3
                          else _letters_or_word(p, short=3))]
    if re.fullmatch(r"[A-Za-z'-]+", t):
        return _word(t)
    # Anything else ("1,2", ":15", "2@58"): say its words, numbers and symbols in order, drop the rest.
    pieces = re.findall(r"[A-Za-z][A-Za-z'-]*|\d+|[" + re.escape("".join(SYMBOLS)) + "]", t)
    return [w for p in pieces for w in ([SYMBOLS[p]] if p in SYMBOLS else _core(p))]


def _word(t: str) -> list[str]:
    """A plain written word: lowercase, except all-caps acronyms (spelled) and Roman numerals."""
    letters = re.sub(r"[^A-Za-z'-]", "", t)
    if len(letters) >= 2 and _ROMAN.fullmatch(letters):  # "World War II", "Henry VIII"
        vals = [{"I": 1, "V": 5, "X": 10}[c] for c in letters]
        return cardinal(sum(-v if v < nxt else v for v, nxt in zip(vals, vals[1:] + [0]))).split()
    m = re.fullmatch(r"([A-Z]{2,})('?[sS])?", letters)
    if m and (m.group(2) is None or m.group(2) in ("s", "'s", "'S")):
        spelled = _letters_or_word(m.group(1), short=4)
        if len(spelled) > 1 and m.group(2):  # "CEOs", "FBI's" → c e o's
            spelled[-1] += "'s"
        elif m.group(2):
            spelled[-1] += m.group(2).lower()
        return spelled
    return [letters.lower()] if letters else []


def _letters_or_word(run: str, short: int) -> list[str]:
    """Letters of an acronym-like run, or the run as a word when CMUdict says it as one ("NASA")."""
    low = run.lower()
    if len(low) < 2:
        return [low]
    lex = lexicon()
    if low in lex:
        as_letters = " ".join(lex.get(ch, "?") for ch in low)
        return list(low) if lex[low] == as_letters else [low]
    if len(low) <= short or not re.search(r"[aeiouy]", low):
        return list(low)
    return [low]


def _dotted(parts: list[str], joiner: str = "dot") -> list[str]:
    """Pieces of a web address or e-mail, joined by 'dot': www → w w w, short unknown pieces spelled."""
    out: list[str] = []
    for i, part in enumerate(p for p in parts if p):
        if i and joiner:
            out.append(joiner)
        if part.isdigit():
            out += digits(part).split()
        elif part.isalpha():
            out += _letters_or_word(part, short=3) if part.lower() not in lexicon() or part.isupper() else [part.lower()]
        else:
            out += _token(part)
    return out


def _currency(m: re.Match) -> str:
    unit, units, sub, subs = CURRENCIES[m.group("cur")]
    amount, scale = m.group("num"), (m.groupdict().get("scale") or "").lower()
    if scale:  # "$1.5M" → one point five million dollars
        return f"{number(amount)} {SCALES[scale]} {units}"
    whole, _, cents = amount.replace(",", "").partition(".")
    if cents and (len(cents) != 2 or not sub):
        return f"{number(amount)} {units}"
    major, minor = int(whole or "0"), int(cents or "0")
    parts = [f"{cardinal(major)} {unit if major == 1 else units}"] if major or not minor else []
    if minor:
        parts.append(f"{cardinal(minor)} {sub if minor == 1 else subs}")
    return " ".join(parts)


def _time(m: re.Match) -> str:
    hour, minute, ampm = int(m.group("h")), m.group("m"), (m.group("ampm") or "").replace(".", "").lower()
    words = cardinal(hour)
    if minute and minute != "00":
        words += " " + (f"oh {cardinal(int(minute))}" if minute.startswith("0") else cardinal(int(minute)))
    elif minute and not ampm:
        words += " o'clock"
    return f"{words} {' '.join(ampm)}".strip()


def _date(year_text: str, month: int, day: int) -> str:
    if not (1 <= month <= 12 and 1 <= day <= 31):  # not a date after all: read the numbers
        return f"{cardinal(month)} {cardinal(day)} {number(year_text)}"
    if len(year_text) == 4:
        said_year = year(int(year_text))
    else:
        said_year = f"oh {cardinal(int(year_text))}" if year_text.startswith("0") else cardinal(int(year_text))
    return f"{MONTHS[month - 1]} {ordinal(day)} {said_year}"


def _slash_date(m: re.Match) -> str:
    a, b = int(m.group(1)), int(m.group(2))
    # month/day/year (American) unless the first number cannot be a month; d.m.y is European.
    month, day = (b, a) if m.group(0)[len(m.group(1))] == "." or a > 12 else (a, b)
    return _date(m.group(3), month, day)


def _fraction(m: re.Match) -> str:
    num, den = int(m.group(1)), int(m.group(2))
    if 2 <= den <= 10 and 0 < num < den:
        name = {2: "half", 4: "quarter"}.get(den) or ordinal(den)
        plural = "halves" if den == 2 else name + "s"
        return f"{cardinal(num)} {name if num == 1 else plural}"
    return f"{number(m.group(1))} {number(m.group(2))}"  # "24/7", "9/11", "50/50"


def _range(m: re.Match) -> str:
    return f"{number(m.group(1))} to {number(m.group(2))}"


_NUMBER_RULES: list[tuple[re.Pattern, object]] = [(re.compile(p, re.I), f) for p, f in [
    (r"(\d+)(?:st|nd|rd|th)", lambda m: ordinal(int(m.group(1)))),
    (r"'?(\d{2}|\d{4})'?s", lambda m: _plural(cardinal(int(m.group(1))) if len(m.group(1)) == 2 else year(int(m.group(1))))),
    (rf"(?P<cur>[$€£¥₹])(?P<num>{_NUM})(?P<scale>k|mn|m|bn|b|t)?", _currency),
    (rf"(?P<num>{_NUM})¢", lambda m: f"{number(m.group('num'))} cents"),
    (rf"(?P<num>{_NUM})(?P<cur>[$€£¥₹])", _currency),
    (r"(?P<h>[01]?\d|2[0-4]):(?P<m>[0-5]\d)(?P<ampm>[ap]\.?m\.?)?", _time),
    (r"(?P<h>1[0-2]|0?\d)(?P<m>)(?P<ampm>[ap]\.?m\.?)", _time),
    (r"(\d+):(\d+)", lambda m: f"{number(m.group(1))} to {number(m.group(2))}"),  # ratios, scores
    (r"(\d{4})-(\d{1,2})-(\d{1,2})", lambda m: _date(m.group(1), int(m.group(2)), int(m.group(3)))),
    (r"(\d{1,2})[/.](\d{1,2})[/.](\d{4}|\d{2})", _slash_date),
    (r"\(?(\d{3})\)?-?(\d{3})-(\d{4})|(\d{3})-(\d{4})", lambda m: digits(m.group(0), zero="oh")),  # phone numbers
    (r"(\d+)/(\d+)", _fraction),
    (rf"({_NUM})[-–]({_NUM})", _range),
    (rf"[-−]({_NUM})", lambda m: f"minus {number(m.group(1))}"),
    (rf"\+({_NUM})", lambda m: f"plus {number(m.group(1))}"),
    (rf"({_NUM})°([CF])", lambda m: f"{number(m.group(1))} degrees {'celsius' if m.group(2) in 'Cc' else 'fahrenheit'}"),
    (rf"({_NUM})({'|'.join(sorted(UNITS, key=len, reverse=True))})",
     lambda m: f"{number(m.group(1))} {UNITS[m.group(2).lower()]}"),
    (_NUM, lambda m: number(m.group(0))),
]]
