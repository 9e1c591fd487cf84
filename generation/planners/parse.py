"""Transparent prompt parsing for the rule planner: noun phrases (with counts and attributes), relations, motion.

A left-to-right chunker over words, driven by the lexicon in ``lexicon.py``: determiners and numbers open a
noun phrase, modifiers and nouns extend it, and verbs, prepositions and conjunctions close it. Clothing and
body-part phrases ("in a black suit", "with curly hair") attach to the phrase before them. Relations are read
from the words between two phrases; motion from direction patterns, given to the nearest phrase that acts
(is followed by a verb) in the same clause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vidlab.generation.planners import lexicon as lx

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*|[,;.!?:]")


@dataclass
class Word:
    """One word (or punctuation mark) of the prompt with its character span and lexical class."""

    text: str
    start: int
    end: int
    low: str
    cls: str = "unk"


@dataclass
class Group:
    """A subject group: one noun phrase, standing for ``count`` subjects (None = one subject, maybe plural)."""

    phrase: str
    span: tuple[int, int]
    head: str
    first: int  # index of the phrase's first word (after determiner/number)
    last: int  # index of the phrase's last word (including attached phrases)
    head_index: int
    count: int | None = None
    attributes: list[str] = field(default_factory=list)
    plural: bool = False
    kind: str = "thing"  # "thing" | "scene" | "stop" | "attached"
    det_start: int = 0  # index of the first word including determiner/number
    agent: bool = False  # followed by a verb: it acts in its clause
    prep_before: str | None = None
    after_verb: bool = False
    motion: str | None = None
    keep: bool = True
    order: int = 0  # position in the user's explicit subject list

    @property
    def singular_head(self) -> str:
        """The head noun in singular form, for matching."""
        return lx.singular(self.head)


@dataclass
class Parse:
    """Everything the planner read from a prompt."""

    prompt: str
    words: list[Word]
    groups: list[Group]
    relations: list[tuple[int, str, int]]
    clause_of: list[int]


def _verb_form(w: str) -> bool:
    """Whether ``w`` is an inflection of a listed verb (runs, running, ran-like forms via the list)."""
    if w in lx.VERBS:
        return True
    cands = []
    if w.endswith("ies"):
        cands.append(w[:-3] + "y")
    if w.endswith("es"):
        cands.append(w[:-2])
    if w.endswith("s"):
        cands.append(w[:-1])
    if w.endswith("ing"):
        stem = w[:-3]
        cands += [stem, stem + "e"]
        if len(stem) > 2 and stem[-1] == stem[-2]:
            cands.append(stem[:-1])
    if w.endswith("ed"):
        stem = w[:-2]
        cands += [stem, w[:-1]]
        if len(stem) > 2 and stem[-1] == stem[-2]:
            cands.append(stem[:-1])
        if w.endswith("ied"):
            cands.append(w[:-3] + "y")
    return any(c in lx.VERBS for c in cands)


def _noun_form(w: str) -> str | None:
    """The noun class of ``w`` (thing/scene/stop/attached) if the lexicon lists it (any number)."""
    for form in (w, lx.singular(w)):
        if form in lx.STOP_NOUNS:
            return "stop"
        if form in lx.ATTACHED_NOUNS and form not in lx.NOUNS:
            return "attached"
        if form in lx.NOUNS:
            return "thing"
        if form in lx.SCENE_NOUNS:
            return "scene"
    return None


def _classify(w: str) -> str:
    """Context-free word class; the chunker resolves ambiguous ones by position."""
    if w in ",;.!?:":
        return "punct"
    if w in lx.NUMBERS or w.isdigit():
        return "num"
    if w in lx.DETERMINERS:
        return "det"
    if w in lx.CONJUNCTIONS:
        return "conj"
    if w in lx.AUXILIARIES:
        return "aux"
    if w in lx.PREPOSITIONS:
        return "prep"
    if w in lx.PRONOUNS:
        return "pron"
    if _noun_form(w) or w.endswith("'s") or w.endswith("’s") or w in lx.QUANTIFIERS:
        return "noun"
    if w in lx.ADJECTIVES or w.endswith(("-shaped", "-haired", "-colored", "-coloured", "-sized")):
        return "adj"
    if _verb_form(w):
        return "verb"
    if w in lx.ADVERBS or (w.endswith("ly") and len(w) > 4):
        return "adv"
    return "unk"


def tokenize(prompt: str) -> list[Word]:
    """Words and punctuation with spans and context-free classes."""
    words = []
    for m in _WORD.finditer(prompt):
        low = m.group().lower().replace("’", "'")
        words.append(Word(m.group(), m.start(), m.end(), low, _classify(low)))
    return words


def _clauses(prompt: str, words: list[Word]) -> list[int]:
    """Clause number of each word: boundaries at punctuation, event conjunctions, and "and" before a new NP."""
    cuts = [m.start() for m in lx.CLAUSE_SPLIT.finditer(prompt.lower())]
    for i, w in enumerate(words[:-1]):
        if w.low == "and" and words[i + 1].cls in ("det", "num"):
            cuts.append(w.start)
    cuts.sort()
    out, k = [], 0
    for w in words:
        while k < len(cuts) and cuts[k] <= w.start:
            k += 1
        out.append(k)
    return out


def _participle(w: str) -> bool:
    """An -ing/-ed form ("sleeping", "carved"), not a word that merely ends so ("swing", "string", "red")."""
    for suffix, min_stem in (("ing", 2), ("ed", 2)):
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            return len(stem) >= min_stem and any(v in stem for v in "aeiouy")
    return False


def _is_modifier_ing(words: list[Word], j: int) -> bool:
    """An -ing/-ed word inside a noun phrase ("a sleeping dog") rather than a verb ("a dog sleeping")."""
    nxt = words[j + 1] if j + 1 < len(words) else None
    return nxt is not None and nxt.cls in ("noun", "adj", "unk")


def _chunk(words: list[Word]) -> list[tuple[int, int, int]]:
    """Noun-phrase chunks as (det_start, first_content, last) word indices."""
    chunks: list[tuple[int, int, int]] = []
    i, n = 0, len(words)
    prev_closed = False  # the previous token ended a noun phrase (so an ambiguous word next is a verb)
    while i < n:
        w = words[i]
        nxt_content = i + 1 < n and words[i + 1].cls in ("noun", "adj", "unk")
        # A phrase opens at a determiner, number, noun or adjective, or an unknown word not right after a phrase.
        starts = w.cls in ("det", "num", "noun", "adj") or (w.cls == "unk" and not prev_closed)
        if w.cls == "noun" and prev_closed and _verb_form(w.low) and w.low != "fish":
            starts = False  # "iron presses": a noun/verb word right after a phrase is the verb
        if w.cls == "unk" and _participle(w.low) and not nxt_content:
            starts = False  # "a toddler walking on": a participle not followed by a noun is a verb
        if starts and w.cls in ("verb", "unk") and _participle(w.low):
            if i > 0 and words[i - 1].cls in ("punct", "conj"):
                starts = False  # ", creating ripples": a participle clause, not a noun phrase
        if not starts:
            prev_closed = False if w.cls not in ("adv",) else prev_closed
            i += 1
            continue
        det_start = i
        while i < n and words[i].cls in ("det", "num"):
            i += 1
        # "a pair of", "a couple of" are numbers; "a group of" is a quantifier: the subject follows "of".
        first = i
        j = i
        last_content = None
        while j < n:
            c = words[j]
            if c.cls not in ("noun", "adj", "unk") and not (c.cls == "verb" and _participle(c.low)):
                break
            has_noun = any(
                words[q].cls == "noun" or (words[q].cls == "unk" and not words[q].low.endswith(("ing", "ed")))
                for q in range(first, j)
            )
            if has_noun and c.cls == "adj":
                break  # "a vase glossy and new": adjectives after the noun are not part of the phrase
            ing = _participle(c.low)
            lexical_noun = c.cls == "noun" and _noun_form(c.low) in ("thing", "scene", "attached")
            nxt_w = words[j + 1] if j + 1 < n else None
            takes_object = nxt_w is not None and nxt_w.cls in ("det", "num", "pron")
            if ing and not (lexical_noun and not (has_noun and _verb_form(c.low) and takes_object)):
                # -ing/-ed words are modifiers only before the noun ("a sleeping dog"), verbs after it
                # ("a toaster toasting bread"); listed nouns like "building" stay nouns unless a verb reading
                # follows a noun ("a child building a sandcastle").
                if has_noun or not _is_modifier_ing(words, j):
                    break
            if has_noun and c.cls in ("unk", "noun"):
                prev_w = words[j - 1].low
                animate = prev_w in lx.ANIMATE or lx.singular(prev_w) in lx.ANIMATE
                nxt = words[j + 1] if j + 1 < n else None
                free = nxt is None or nxt.cls in ("det", "prep", "adv", "punct", "conj", "pron", "num")
                prev_listed = _noun_form(prev_w) is not None
                if c.cls == "unk" and c.low.endswith("s") and (animate or free or prev_listed):
                    break  # "a kangaroo bounds across", "a knife sharpens pencil": an -s word after a noun acts
                if c.cls == "unk" and animate and free:
                    break  # "a puppy embark on": an unknown word between an animal and a preposition acts
                if (
                    c.cls == "noun"
                    and not ing
                    and _verb_form(c.low)
                    and (animate or free or _noun_form(c.low) != "thing")
                ):
                    break  # "a penguin slides", "bears fish in": a noun/verb word after an animal is the verb
                if c.cls == "noun" and _noun_form(c.low) == "stop":
                    break  # "a hat left on": a stop word after the head ends the phrase
            last_content = j
            j += 1
        if last_content is None:
            prev_closed = False
            i = max(i, det_start + 1)
            continue
        chunks.append((det_start, first, last_content))
        i = last_content + 1
        prev_closed = True
    return chunks


def _count_of(words: list[Word], det_start: int, first: int) -> int | None:
    """The number a phrase's determiners/number words give ("three", "3", "a pair of"); None if none."""
    for w in words[det_start:first]:
        if w.low in lx.NUMBERS:
            return lx.NUMBERS[w.low]
        if w.low.isdigit():
            return int(w.low)
    return None


def _make_group(prompt: str, words: list[Word], det_start: int, first: int, last: int) -> Group:
    """A Group from a chunk: head = last word, attributes = modifiers before it."""
    head_w = words[last]
    head = head_w.low
    if head.endswith("'s"):
        head = head[:-2]
    kind = _noun_form(head) or "thing"
    possessor = next((w for w in words[first:last] if w.low.endswith("'s")), None)
    if possessor is not None:  # "a cat's green eyes": the cat is the subject
        head = possessor.low[:-2]
        kind = _noun_form(head) or "thing"
    elif head_w.cls == "adj":
        # An adjective-only phrase ("from green to red", "kicked hard") names no subject, unless it is a
        # material used as a noun ("a piece of metal").
        kind = "thing" if head in lx.MASS_NOUNS else "stop"
    elif (
        head_w.cls == "unk"
        and det_start == first
        and first > 0
        and (words[first - 1].cls in ("conj", "pron") or words[first - 1].low == "to")
    ):
        kind = "stop"  # "fades to translucent", "deflates and flattens", "as it dries": not a subject
    visual = lx.COLOURS | lx.MATERIALS | lx.SHAPES
    if kind == "scene" and any(w.low in visual for w in words[first:last]):
        kind = "thing"  # "a marble floor", "a rainbow river": described scenery is something to draw
    span = (words[first].start, head_w.end)
    attrs = [w.low for w in words[first:last] if w.cls == "adj" or w.low in lx.ADJECTIVES]
    return Group(
        phrase=prompt[span[0] : span[1]],
        span=span,
        head=head,
        first=first,
        last=last,
        head_index=last,
        count=_count_of(words, det_start, first),
        attributes=attrs,
        plural=lx.is_plural(head),
        kind=kind,
        det_start=det_start,
    )


def _merge_quantifiers(prompt: str, words: list[Word], groups: list[Group]) -> list[Group]:
    """'a group of elephants' -> the elephants phrase; 'a pair of X' -> X with count 2 unless it is one object."""
    out: list[Group] = []
    skip = set()
    for k, g in enumerate(groups):
        if k in skip:
            continue
        nxt = groups[k + 1] if k + 1 < len(groups) else None
        is_quant = g.head in lx.QUANTIFIERS and g.first == g.last
        if is_quant and g.head not in lx.NOUNS:
            g.kind = "stop"  # "in a row", "a pile": a quantity word alone names no subject
        if is_quant and nxt is not None and nxt.det_start == g.last + 2 and words[g.last + 1].low == "of":
            if g.head in ("pair", "couple") and nxt.plural and nxt.head not in lx.IRREGULAR_PLURALS:
                nxt.count = nxt.count or 2
            skip.add(k + 1)
            nxt.det_start = g.det_start  # "atop a stack of books": relations govern the whole phrase
            out.append(nxt)
            continue
        out.append(g)
    return out


def _attach(prompt: str, words: list[Word], groups: list[Group]) -> list[Group]:
    """Attach clothing/body-part phrases ("in a red suit", "with wings") to the subject before them."""
    out: list[Group] = []
    for g in groups:
        prev = out[-1] if out else None
        if (
            prev is not None
            and (
                g.kind == "attached"
                or lx.singular(g.head) in lx.ATTACHED_NOUNS
                or g.head in lx.ATTACHED_NOUNS
            )
            and g.det_start >= 1
            and words[g.det_start - 1].low in lx.ATTACH_PREPS
            and g.det_start - 1 == prev.last + 1
            and prev.kind in ("thing", "scene")
            and (prev.head in lx.ANIMATE or lx.singular(prev.head) in lx.ANIMATE)
        ):
            prev.span = (prev.span[0], g.span[1])
            prev.phrase = prompt[prev.span[0] : prev.span[1]]
            prev.last = g.last
            prev.attributes.append(prompt[words[g.det_start - 1].start : g.span[1]])
            continue
        out.append(g)
    return out


def _annotate(words: list[Word], groups: list[Group]) -> None:
    """Set agent (followed by a verb), the preposition before, and whether a verb governs the phrase."""
    for g in groups:
        j = g.last + 1
        while j < len(words) and words[j].cls == "adv":
            j += 1
        if j < len(words):
            nxt = words[j]
            g.agent = nxt.cls in ("verb", "aux") or (
                nxt.cls in ("unk", "noun") and (_verb_form(nxt.low) or nxt.low.endswith(("s", "ing", "ed")))
            )
        if g.det_start > 0:
            before = words[g.det_start - 1]
            g.prep_before = before.low if before.cls == "prep" else None
            g.after_verb = before.cls == "verb" or (before.cls == "unk" and before.low.endswith(("s", "ing")))


def noun_groups(prompt: str, words: list[Word] | None = None) -> list[Group]:
    """All noun-phrase groups of the prompt (before deciding which are subjects)."""
    words = tokenize(prompt) if words is None else words
    groups = [_make_group(prompt, words, *c) for c in _chunk(words)]
    groups = _merge_quantifiers(prompt, words, groups)
    groups = _attach(prompt, words, groups)
    _annotate(words, groups)
    return groups


def _find_relation(gap: str) -> str | None:
    """The spatial relation that ends the text between two phrases (it must govern the second one)."""
    best: tuple[int, int, str] | None = None
    for prio, (rel, pat) in enumerate(lx.SPATIAL_PATTERNS):
        for m in pat.finditer(gap):
            if gap[m.end() :].strip():
                continue  # words left between the relation and the phrase: it does not govern it
            key = (-m.end(), prio, rel)
            if best is None or key < best:
                best = key
    return best[2] if best else None


def parse(prompt: str, explicit: list[tuple[str, tuple[int, int]]] | None = None) -> Parse:
    """Parse ``prompt``: subject groups (or the ``explicit`` (phrase, span) subjects), relations, motion."""
    words = tokenize(prompt)
    clause_of = _clauses(prompt, words)
    all_groups = noun_groups(prompt, words)
    if explicit is not None:
        groups = [_explicit_group(prompt, words, p, s) for p, s in explicit]
        for order, g in enumerate(groups):
            g.order = order
        groups.sort(key=lambda g: (g.span, g.order))
        _annotate(words, groups)
    else:
        groups = all_groups
    low = prompt.lower()
    # Relations between consecutive phrases; the subject is the nearest acting phrase in the clause.
    relations: list[tuple[int, str, int]] = []
    chain = [k for k, g in enumerate(groups) if g.kind not in ("stop", "attached")]
    for prev_k, k in zip(chain, chain[1:]):
        b = groups[k]
        prev = groups[prev_k]
        gap = low[words[prev.last].end : words[b.det_start].start]
        rel = _find_relation(gap)
        if rel is None:
            continue
        if b.kind in ("stop", "attached") or (b.kind == "scene" and rel not in lx.STRONG_RELATIONS):
            continue
        if b.kind == "scene" and rel in ("left of", "right of") and re.search(r"\bto\s+the\b", gap):
            # "a cat slinking to the left side of a living room": moving towards a side of the scene
            a_idx = _relation_subject(groups, clause_of, k)
            if a_idx is not None and groups[a_idx].motion is None:
                groups[a_idx].motion = rel.split()[0]
            continue
        if b.kind == "scene":
            b.kind = "thing"  # "on the left of an old house": a place can be a subject
        a_idx = _relation_subject(groups, clause_of, k)
        if rel == "on" and not gap.replace("onto", "").replace("on", "").replace("upon", "").strip():
            a_idx = prev_k  # "places a cake on a tray": what is put on something is the phrase right before
        if a_idx is None:
            continue
        relations.append((a_idx, rel, k))
    _select(groups, clause_of, explicit is not None)
    _assign_motion(prompt, words, groups, clause_of)
    keep = sorted(
        (i for i, g in enumerate(groups) if g.keep), key=lambda i: groups[i].order if explicit else i
    )
    remap = {old: new for new, old in enumerate(keep)}
    rels = [(remap[a], r, remap[b]) for a, r, b in relations if a in remap and b in remap and a != b]
    return Parse(prompt, words, [groups[i] for i in keep], rels, clause_of)


def _relation_subject(groups: list[Group], clause_of: list[int], k: int) -> int | None:
    """Nearest earlier acting subject phrase in the same clause as phrase ``k``, else the nearest one."""
    clause = clause_of[groups[k].det_start]
    cands = [
        i
        for i in range(k - 1, -1, -1)
        if clause_of[groups[i].det_start] == clause and groups[i].kind in ("thing", "scene")
    ]
    cands = [i for i in cands if groups[i].kind == "thing" or groups[i].agent]
    for i in cands:
        if groups[i].agent:
            return i
    return cands[0] if cands else None


def _select(groups: list[Group], clause_of: list[int], explicit: bool) -> None:
    """Decide which phrases are subjects: things always; scenery only when it acts or is acted on."""
    if explicit:
        return
    seen_clause: set[int] = set()
    for g in groups:
        clause = clause_of[g.det_start]
        first_in_clause = clause not in seen_clause
        seen_clause.add(clause)
        if g.kind == "thing":
            g.keep = True
        elif g.kind == "attached":
            g.keep = first_in_clause and g.agent and g.prep_before is None  # "The face is morphing"
        elif g.kind == "scene":
            g.keep = g.prep_before is None and (g.agent or g.after_verb or first_in_clause)
        else:
            g.keep = False
    if not any(g.keep for g in groups):
        # Never plan an empty layout for a prompt with a noun in it: keep the first non-stop phrase.
        for g in groups:
            if g.kind != "stop":
                g.keep = True
                break
        else:
            if groups:
                groups[0].keep = True


def _assign_motion(prompt: str, words: list[Word], groups: list[Group], clause_of: list[int]) -> None:
    """Find direction phrases and give each to the phrase that moves."""
    low = prompt.lower()
    matches: list[tuple[int, int, str]] = []
    for direction, pat in lx.MOTION_PATTERNS:
        for m in pat.finditer(low):
            matches.append((m.start(), m.end(), direction))
    matches.sort()
    taken: list[tuple[int, int]] = []
    for s, e, direction in matches:
        if any(s < te and ts < e for ts, te in taken):
            continue
        taken.append((s, e))
        k = next((i for i, w in enumerate(words) if w.start >= s), None)
        if k is not None and words[k].end >= e and words[k].low.endswith("ing") and k + 1 < len(words):
            if words[k + 1].cls in ("noun", "adj", "unk"):
                continue  # "falling debris": a modifier, not the motion of a subject
        target = _mover(words, groups, clause_of, s, e)
        if target is not None and target.motion is None:
            target.motion = direction  # a phrase already moving keeps its first direction


def _mover(words: list[Word], groups: list[Group], clause_of: list[int], s: int, e: int) -> Group | None:
    """The subject a motion phrase at [s, e) belongs to: the nearest acting phrase before it in its clause."""
    subjects = [g for g in groups if g.keep]
    word_at = next((i for i, w in enumerate(words) if w.start >= s), len(words) - 1)
    clause = clause_of[word_at] if words else 0
    trigger = words[word_at].low if words else ""
    after = [g for g in subjects if g.span[0] >= e]
    if trigger.startswith(("lift", "drop")) and after and after[0].det_start <= word_at + 2:
        return after[0]  # transitive: "wind lifts a kite" moves the kite
    before = [g for g in subjects if g.span[1] <= s][::-1]
    same = [g for g in before if clause_of[g.det_start] == clause]
    for pool in ([g for g in same if g.agent], same, [g for g in before if g.agent], before, after):
        if pool:
            return pool[0]
    return None


def _explicit_group(prompt: str, words: list[Word], phrase: str, span: tuple[int, int]) -> Group:
    """A Group for a user-given subject phrase at ``span`` (count from a number word just before it)."""
    idx = [i for i, w in enumerate(words) if w.start >= span[0] and w.end <= span[1]]
    if not idx:
        idx = [min(range(len(words)), key=lambda i: abs(words[i].start - span[0]))] if words else [0]
    first, last = idx[0], idx[-1]
    det_start = first
    while det_start > 0 and words[det_start - 1].cls in ("det", "num"):
        det_start -= 1
    count = _count_of(words, det_start, first) or _count_of(words, first, last + 1)
    head = words[last].low if words else phrase.lower()
    attrs = [w.low for w in words[first:last] if w.cls == "adj"]
    return Group(
        phrase=phrase,
        span=span,
        head=head,
        first=first,
        last=last,
        head_index=last,
        count=count,
        attributes=attrs,
        plural=lx.is_plural(head),
        kind="thing",
        det_start=det_start,
    )
