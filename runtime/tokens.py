"""Token estimate and poison check over carried text (SPEC §3.7).

The estimate is CJK characters x ``token_cjk_factor`` + other characters / ``token_other_divisor``
(back-solved from Claude Code's ``/context`` readings; errs high). The poison check counts
regex hits; the default patterns use word boundaries so bare substrings do not trip it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from runtime.config import RebuildConfig

_CJK = re.compile(
    "[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)


def cjk_count(text: str) -> int:
    """How many characters of ``text`` are CJK (kana, hanzi/kanji, hangul, CJK punctuation)."""
    if text.isascii():
        return 0
    return _CJK.subn("", text)[1]


def estimate_tokens(text: str, knobs: RebuildConfig) -> float:
    """Estimated tokens of ``text`` (a float; callers round the total once)."""
    cjk = cjk_count(text)
    return cjk * knobs.token_cjk_factor + (len(text) - cjk) / knobs.token_other_divisor


def poison_hits(texts: Iterable[str], knobs: RebuildConfig) -> int:
    """Total matches of every poison pattern over ``texts``."""
    patterns = knobs.poison_regexes
    return sum(len(p.findall(text)) for text in texts for p in patterns)
