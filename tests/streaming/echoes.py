"""How a model told to continue a cut-off reply repeats its last words (for scripted models).

Real models asked, without prefill, to continue where a reply stopped often repeat the last
words first. The scripted models of the seam property test and the kill soak do the same,
within the seam policy of :mod:`awaken_s3.streaming.continuation`: an ending of the prefix
that starts at a word boundary and is long enough to be recognised and trimmed.
"""

from __future__ import annotations

import random

from awaken_s3.streaming.continuation import MIN_SEAM_OVERLAP, MIN_SEAM_WORDS_OVERLAP


def trimmable(ending: str) -> bool:
    words = len(ending.split())
    return len(ending) >= MIN_SEAM_WORDS_OVERLAP and (
        words >= 2 or (words == 1 and len(ending) >= MIN_SEAM_OVERLAP)
    )


def echo_of(prefix: str, rng: random.Random) -> str:
    """Nothing (three times in ten), or an ending of ``prefix`` the seam check trims."""
    endings = [
        prefix[start:]
        for start in range(max(0, len(prefix) - 60), len(prefix))
        if (start == 0 or prefix[start - 1].isspace())
        and not prefix[start].isspace()
        and trimmable(prefix[start:])
    ]
    if not endings or rng.random() < 0.3:
        return ""
    return rng.choice(endings)
