"""The training corpus: the King James Bible as Debian's bible-kjv package
prints it (public domain), split by chapter into train and held-out text.

Every 20th chapter (index % 20 == 10, 5 % of the text) is held out: neither
the tokenizer nor the model ever sees it, and the perplexity numbers in
docs/QUALITY.md are measured on it.  Verse references ("Ge1:1") are dropped
so the text reads as prose; a chapter is its verses joined by spaces, and
chapters are separated by a blank line.
"""

import re
import subprocess

PACKAGE = "bible-kjv"          # /usr/bin/bible; data in bible-kjv-text
RANGE = "Genesis1:1-Revelation22:21"
HELDOUT_EVERY, HELDOUT_AT = 20, 10
_REF = re.compile(r"^([0-9]?[A-Za-z]+)(\d+):(\d+) (.*)$")


def package_version(pkg):
    """Installed Debian version of pkg ("" when dpkg-query cannot tell)."""
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def chapters():
    """[(book, chapter, text)] in canonical order, from `bible -f`."""
    try:
        out = subprocess.run(["bible", "-f", RANGE], check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("corpus: cannot run `bible` (apt-get install bible-kjv bible-kjv-text): %s" % e)
    chs, key, verses = [], None, []
    for line in out.splitlines():
        m = _REF.match(line.strip())
        if not m:
            if line.strip() and verses:     # a continuation line of the verse before
                verses[-1] += " " + line.strip()
            continue
        k = (m.group(1), int(m.group(2)))
        if k != key:
            if verses:
                chs.append((key[0], key[1], " ".join(verses)))
            key, verses = k, []
        verses.append(m.group(4).strip())
    if verses:
        chs.append((key[0], key[1], " ".join(verses)))
    if len(chs) < 1000:
        raise SystemExit("corpus: `bible -f %s` printed %d chapters, expected 1189" % (RANGE, len(chs)))
    return chs


def split():
    """(train_chapters, heldout_chapters), lists of chapter texts."""
    train, held = [], []
    for i, (_, _, text) in enumerate(chapters()):
        (held if i % HELDOUT_EVERY == HELDOUT_AT else train).append(text)
    return train, held


def verses_of(chapter_text):
    """Sentences of a chapter: split after . ; : ? ! followed by a capital."""
    return [s for s in re.split(r"(?<=[.;:?!]) (?=[A-Z])", chapter_text) if s]


def join(chs):
    return "\n\n".join(chs) + "\n"
