"""The lab's synthetic language: a word vocabulary and a document generator (pure Python).

The corpus is built so that a target's greedy continuations are partly predictable from tokens
alone (grammar, counting) and partly only from state the target computes (running sums, long-range
copies of random codes defined earlier in the document, which subject a story continues with).
That puts a well-trained drafter near real EAGLE-3 numbers instead of near-perfect.

Document sections (mixed and repeated at random):

- ``file`` records: ``K12 is q x f .`` random keys bound to random 3-letter codes;
  later ``ask K12 ? q x f .`` recalls one (a long-range copy);
- story sentences: ``the old fox sees the red cat in the garden .`` (the object of one sentence
  is the subject of the next and usually the subject's successor in a fixed cycle of nouns;
  per-noun preferred adjectives and verbs);
- running sums: ``sum 3 + 4 = 7 + 9 = 16 .`` (numbers 0..99, the state only the target computes);
- counting runs: ``count 34 35 36 37 .``;
- ``name says w w w .`` repeats.

The style knobs (``LabSettings``: ``pref``, ``succ``, ``mix``, ``ordered``, ``code_len``,
``file_keys``) set how often the preferred words and successors are used, the section weights,
and whether asks recall keys in the order they were filed. Greedy decoding turns every free
choice into the target's favourite (a briefly trained target's continuations settle into short
loops after a few dozen tokens, which is why the lab's responses are short), so what keeps a
drafter honest is the share of sections whose continuation depends on state (asks, sums,
records): the defaults weight those and make the ask order a rule the target has to track.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

SPECIAL = ["<pad>", "<bos>", "<eos>", "<unk>"]
PUNCT = [".", "?", "=", "+", ":", ","]
FUNCTION = ["the", "a", "in", "is", "ask", "file", "sum", "count", "says", "and", "then", "near", "with"]
NOUNS = [
    "fox",
    "cat",
    "dog",
    "bee",
    "owl",
    "cow",
    "hen",
    "rat",
    "elk",
    "ant",
    "bat",
    "eel",
    "yak",
    "pig",
    "ram",
    "emu",
    "doe",
    "jay",
    "cod",
    "koi",
    "ape",
    "boar",
    "crab",
    "crow",
    "deer",
    "duck",
    "frog",
    "goat",
    "hare",
    "lamb",
    "lion",
    "mole",
    "moth",
    "mule",
    "newt",
    "seal",
    "slug",
    "swan",
    "toad",
    "wolf",
    "wren",
    "worm",
    "bear",
    "colt",
    "dove",
    "gnat",
    "hawk",
    "ibis",
]
ADJS = [
    "red",
    "old",
    "big",
    "small",
    "quick",
    "lazy",
    "happy",
    "sad",
    "green",
    "blue",
    "tiny",
    "loud",
    "calm",
    "brave",
    "shy",
    "wild",
    "tame",
    "young",
    "grey",
    "pale",
    "dark",
    "bright",
    "wise",
    "odd",
    "proud",
    "gentle",
    "fierce",
    "sleepy",
]
VERBS = [
    "sees",
    "finds",
    "likes",
    "chases",
    "meets",
    "helps",
    "follows",
    "greets",
    "hears",
    "watches",
    "feeds",
    "calls",
    "leads",
    "trusts",
    "avoids",
    "visits",
    "pushes",
    "carries",
    "teaches",
    "hides",
]
PLACES = [
    "garden",
    "forest",
    "river",
    "barn",
    "field",
    "house",
    "cave",
    "lake",
    "hill",
    "road",
    "park",
    "shop",
    "yard",
    "bridge",
    "tower",
    "valley",
]
NAMES = ["ada", "bob", "cy", "dee", "eve", "flo", "gus", "hal", "ivy", "jo", "kim", "lu", "max", "ned", "oz", "pam"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
NUMBERS = [str(i) for i in range(100)]
NUM_KEYS = 48
KEYS = [f"K{i:02d}" for i in range(NUM_KEYS)]
# default weights of the sections: story, ask, sums, count, says, records (the lab's settings)
MIX = (0.20, 0.35, 0.20, 0.05, 0.05, 0.15)


def vocabulary() -> list[str]:
    """All tokens, specials first (ids 0..3); the order is fixed: ids never change between builds."""
    words = SPECIAL + PUNCT + FUNCTION + NOUNS + ADJS + VERBS + PLACES + NAMES + LETTERS + NUMBERS + KEYS
    seen, out = set(), []
    for w in words:
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


class Generator:
    """Deterministic document stream for a seed."""

    def __init__(
        self,
        seed: int,
        world: int = 0,
        *,
        pref: float = 0.6,
        succ: float = 0.8,
        mix: Sequence[float] | None = None,
        ordered: bool = True,
        code_len: int = 3,
        file_keys: Sequence[int] = (2, 4),
        language: int | None = None,
    ):
        self.rng = random.Random(seed)
        self.pref, self.succ_p = pref, succ
        # ordered: asks recall keys in the order they were filed (a greedy reader must track
        # which came next instead of falling back on one favourite key)
        self.ordered, self.code_len, self.file_keys = ordered, code_len, tuple(file_keys)
        self._asked = 0
        # cumulative thresholds of story, ask, sums, count, says (records take the rest)
        w = list(mix or MIX)
        self.cuts = [sum(w[: i + 1]) / sum(w) for i in range(len(w) - 1)]
        # the language's fixed preferences, shared by its streams: ``language`` when given (the lab's
        # settings fix it, so a seed changes the sampling, not the language), else ``world``
        lang = world if language is None else language
        prefs = random.Random(lang * 7919 + 17)
        self.adj_of = {n: prefs.sample(ADJS, 2) for n in NOUNS}
        self.verb_of = {n: prefs.sample(VERBS, 2) for n in NOUNS}
        self.place_of = {n: prefs.choice(PLACES) for n in NOUNS}
        order = NOUNS[:]
        prefs.shuffle(order)  # one long cycle: who meets whom next
        self.succ = {order[i]: order[(i + 1) % len(order)] for i in range(len(order))}

    # -- sections ------------------------------------------------------------------------------
    def _np(self, noun: str) -> list[str]:
        r = self.rng
        adj = r.choice(self.adj_of[noun]) if r.random() < self.pref else r.choice(ADJS)
        return ["the", adj, noun]

    def story(self, subject: str | None = None, n: int | None = None) -> tuple[list[str], str]:
        r = self.rng
        subject = subject or r.choice(NOUNS)
        out: list[str] = []
        for _ in range(n or r.randint(1, 3)):
            obj = self.succ[subject] if r.random() < self.succ_p else r.choice(NOUNS)
            verb = r.choice(self.verb_of[subject]) if r.random() < self.pref else r.choice(VERBS)
            out += [*self._np(subject), verb, *self._np(obj)]
            if r.random() < 0.5:
                place = self.place_of[obj] if r.random() < 0.5 else r.choice(PLACES)
                out += ["in", "the", place]
            out.append(".")
            subject = obj
        return out, subject

    def records(self, table: dict[str, list[str]]) -> list[str]:
        r = self.rng
        out = ["file", ":"]
        for _ in range(r.randint(*self.file_keys)):
            key = r.choice(KEYS)
            code = [r.choice(LETTERS) for _ in range(self.code_len)]
            table[key] = code
            out += [key, "is", *code, "."]
        return out

    def ask(self, table: dict[str, list[str]]) -> list[str]:
        if self.ordered:
            keys = list(table)
            key = keys[self._asked % len(keys)]
            self._asked += 1
        else:
            key = self.rng.choice(sorted(table))
        return ["ask", key, "?", *table[key], "."]

    def sums(self) -> list[str]:
        r = self.rng
        total = r.randint(0, 20)
        out = ["sum", str(total)]
        for _ in range(r.randint(2, 5)):
            step = r.randint(1, 9)
            if total + step > 99:
                break
            total += step
            out += ["+", str(step), "=", str(total)]
        return [*out, "."]

    def count(self) -> list[str]:
        r = self.rng
        start = r.randint(0, 90)
        run = [str(i) for i in range(start, min(99, start + r.randint(3, 7)) + 1)]
        return ["count", *run, "."]

    def says(self) -> list[str]:
        r = self.rng
        w = r.choice(NOUNS + ADJS)
        return [r.choice(NAMES), "says", w, w, w, "."]

    def document(self) -> list[str]:
        """One document: records first, then a mix in which asks recall earlier records."""
        r = self.rng
        table: dict[str, list[str]] = {}
        self._asked = 0
        out = ["<bos>", *self.records(table)]
        subject = None
        for _ in range(r.randint(6, 12)):
            x, c = r.random(), self.cuts
            if x < c[0]:
                part, subject = self.story(subject)
            elif x < c[1]:
                part = self.ask(table)
            elif x < c[2]:
                part = self.sums()
            elif x < c[3]:
                part = self.count()
            elif x < c[4]:
                part = self.says()
            else:
                part = self.records(table)
            out += part
        return [*out, "<eos>"]

    def stream(self) -> Iterator[str]:
        while True:
            yield from self.document()


def token_stream(seed: int, n_tokens: int, vocab_index: dict[str, int], world: int = 0, **style: Any) -> list[int]:
    """``n_tokens`` ids from the document stream of ``seed`` in world ``world``."""
    gen = Generator(seed, world, **style).stream()
    return [vocab_index[next(gen)] for _ in range(n_tokens)]
