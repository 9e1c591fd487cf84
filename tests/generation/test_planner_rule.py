"""The offline rule planner and the plan_layout entry point (rule and file planners)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vidlab import generation
from vidlab.generation.layout import Layout, LayoutError, SubjectLayout
from vidlab.generation.planners import plan_layout
from vidlab.generation.subjects import SubjectNotFoundError
from vidlab.generation.tiny_tokenizer import build_tiny_tokenizer


def centre(box):
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


def by_phrase(layout: Layout, phrase: str) -> list[int]:
    return [i for i, s in enumerate(layout.subjects) if s.phrase == phrase]


def test_package_level_entry_point():
    layout = generation.plan_layout("a red cat on the left of a blue vase")
    assert isinstance(layout, generation.Layout)
    assert layout.planner == "rule"
    assert [s.phrase for s in layout.subjects] == ["red cat", "blue vase"]
    assert layout.subjects[0].attributes == ["red"]
    assert Layout.from_json(layout.to_json()).to_dict() == layout.to_dict()


@pytest.mark.parametrize(
    ("prompt", "relation"),
    [
        ("a dog on the left of a bicycle", "left of"),
        ("a dog on the right side of a bicycle", "right of"),
        ("a kite above a boy", "above"),
        ("a basket below a television", "below"),
        ("a cat sitting on a table", "on"),
        ("a cat lounging on top of a television", "on"),
        ("a cat hiding under a bench", "under"),
        ("a cow walking in front of a chair", "in front of"),
        ("a cow walking behind a chair", "behind"),
        ("a dog sitting next to a vase", "near"),
    ],
)
def test_spatial_relations_found_and_satisfied(prompt, relation):
    layout = plan_layout(prompt)
    assert len(layout.subjects) == 2
    rels = [r for r in layout.relations if r.relation == relation]
    assert len(rels) == 1 and (rels[0].subject, rels[0].object) == (0, 1)
    assert layout.relation_holds(rels[0])
    a, b = layout.subjects[0].box_at(0.5), layout.subjects[1].box_at(0.5)
    (ax, ay), (bx, by) = centre(a), centre(b)
    expected = {
        "left of": ax < bx,
        "right of": ax > bx,
        "above": ay < by,
        "below": ay > by,
        "on": ay < by and a[3] >= b[1] - 0.05,
        "under": ay > by,
        "in front of": a[3] > b[3],
        "behind": a[3] < b[3],
        "near": True,
    }[relation]
    assert expected


@pytest.mark.parametrize(
    ("prompt", "direction"),
    [
        ("a cat walks from left to right on a table", "right"),
        ("a boat sails to the left on the ocean", "left"),
        ("a balloon slowly ascending at a party", "up"),
        ("an apple falling downwards from a tree", "down"),
        ("a fox sneaks past a sleeping dog from right to the left", "left"),
    ],
)
def test_motion_moves_boxes_along_the_direction(prompt, direction):
    layout = plan_layout(prompt)
    movers = [r for r in layout.relations if r.relation.startswith("moving")]
    assert [r.relation for r in movers] == [f"moving {direction}"]
    s = layout.subjects[movers[0].subject]
    (x0, y0), (x1, y1) = centre(s.box_at(0)), centre(s.box_at(1))
    d = {"right": x1 - x0, "left": x0 - x1, "down": y1 - y0, "up": y0 - y1}[direction]
    assert d > 0.3
    others = [t for i, t in enumerate(layout.subjects) if i != movers[0].subject]
    assert all(t.box_at(0) == t.box_at(1) for t in others)  # only the mover moves


def test_two_movers_in_one_prompt():
    layout = plan_layout("A ball rolls left while a puppy dashes right")
    rel = {layout.subjects[r.subject].phrase: r.relation for r in layout.relations}
    assert rel == {"ball": "moving left", "puppy": "moving right"}


def test_counts_give_copies_with_a_shared_phrase_and_tokens():
    prompt = "three cats and two dogs play in a garden"
    layout = plan_layout(prompt)
    cats, dogs = by_phrase(layout, "cats"), by_phrase(layout, "dogs")
    assert len(cats) == 3 and len(dogs) == 2
    assert [layout.subjects[i].count_index for i in cats] == [0, 1, 2]
    assert "garden" not in layout.phrases  # scenery is not a subject
    assert [layout.subjects[i].label for i in dogs] == ["dogs #1", "dogs #2"]
    tok = build_tiny_tokenizer()
    idx = layout.subject_token_indices(tok)
    assert idx[cats[0]] == idx[cats[1]] == idx[cats[2]] != idx[dogs[0]]
    assert tok.decode([tok(prompt)["input_ids"][i] for i in idx[cats[0]]]).strip() == "cats"
    boxes = [layout.subjects[i].box_at(0) for i in cats + dogs]
    for a, b in zip(boxes, boxes[1:]):
        assert a[2] <= b[0] + 1e-9  # side by side, no overlap


def test_counted_group_relation_uses_group_boxes():
    layout = plan_layout("three leopards are walking in front of five trees")
    assert len(by_phrase(layout, "leopards")) == 3 and len(by_phrase(layout, "trees")) == 5
    (r,) = [r for r in layout.relations if r.relation == "in front of"]
    assert layout.relation_holds(r)


def test_attributes_and_attached_phrases():
    layout = plan_layout("Man in a black suit driving a red sports car")
    assert layout.phrases == ["Man in a black suit", "red sports car"]
    assert layout.subjects[0].attributes == ["in a black suit"]


def test_explicit_subjects_keep_user_order_and_counts():
    layout = plan_layout("three cats sit on the left of a blue vase", subjects=["blue vase", "cats"])
    assert layout.phrases[0] == "blue vase" and layout.phrases[1:] == ["cats"] * 3
    (r,) = [r for r in layout.relations if r.relation == "left of"]
    assert layout.subjects[r.subject].phrase == "cats" and layout.subjects[r.object].phrase == "blue vase"
    assert layout.relation_holds(r)


def test_explicit_subject_missing_is_an_error():
    with pytest.raises(SubjectNotFoundError, match="'zebra'"):
        plan_layout("a cat and a dog", subjects=["cat", "zebra"])
    with pytest.raises(ValueError, match="subjects must be a list"):
        plan_layout("a cat", subjects="cat")


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown planner 'magic'"):
        plan_layout("a cat", planner="magic")
    with pytest.raises(ValueError, match="non-empty string"):
        plan_layout("   ")
    with pytest.raises(TypeError, match="unknown options"):
        plan_layout("a cat", planner="rule", nonsense=1)


def test_geometry_options_apply():
    tight = plan_layout("a dog on the left of a cat", margin=0.2)
    for s in tight.subjects:
        x0, y0, x1, y1 = s.box_at(0)
        assert x0 >= 0.2 and y0 >= 0.2 and x1 <= 0.8 and y1 <= 0.8
    assert tight.meta["geometry"]["margin"] == 0.2


def test_deterministic():
    p = "A robot walking from right to left across the moon with a car driving left to right"
    assert plan_layout(p).to_json() == plan_layout(p).to_json()


# ---- file planner -----------------------------------------------------------------------------------
def test_file_planner_round_trip(tmp_path):
    prompt = "a red cat on the left of a blue vase"
    path = plan_layout(prompt).save(tmp_path / "mine.yaml")
    layout = plan_layout(prompt, planner="file", path=path)
    assert layout.planner == "file" and layout.meta["source"] == str(path)
    assert layout.phrases == ["red cat", "blue vase"]


def test_file_planner_checks_the_prompt(tmp_path):
    path = Layout("a cat", [SubjectLayout("cat", [(0, (0, 0, 0.5, 0.5))])]).save(tmp_path / "l.json")
    with pytest.raises(SubjectNotFoundError, match="'cat'"):
        plan_layout("a dog runs", planner="file", path=path)
    with pytest.raises(LayoutError, match="needs path"):
        plan_layout("a cat", planner="file")
    with pytest.raises(LayoutError, match="no boxes for subjects"):
        plan_layout("a cat near a dog", planner="file", path=path, subjects=["dog"])
    # The same layout for a reworded prompt: the phrase is found again (its old span is dropped).
    moved = plan_layout("look, a cat", planner="file", path=path)
    assert moved.prompt == "look, a cat"


WORDS = [
    "a", "the", "two", "three", "red", "blue", "wooden", "cat", "cats", "dog", "car", "tree", "on", "left", "right",
    "of", "above", "under", "behind", "in", "front", "near", "moving", "runs", "from", "to", "and", "while", ",",
    "upwards", "falls", "zorblax", "garden", "sky",
]  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=14))
def test_any_word_salad_gives_a_valid_layout(words):
    """Property: the rule planner never crashes, and every subject phrase occurs in the prompt."""
    prompt = " ".join(words)
    layout = plan_layout(prompt)
    Layout.from_json(layout.to_json())  # valid by construction
    for s in layout.subjects:
        assert s.phrase.lower() in prompt.lower()
    for r in layout.relations:
        assert layout.relation_holds(r)


# Held-out prompts, written (with their answers) after the lexicon was built and measured once without tuning:
# subjects 59/59, counts 59/59, relations+motion 23/24 (the miss, "atop a stack of old books", was then fixed).
# Each entry: prompt, {subject head: count}, (subject, relation, object) or None, (subject, direction) or None.
HELD = [  # fmt: skip
    (
        "A grey wolf standing on the left of a wooden cart",
        {"wolf": 1, "cart": 1},
        ("wolf", "left of", "cart"),
        None,
    ),
    ("Two otters float beside a small canoe", {"otter": 2, "canoe": 1}, ("otter", "near", "canoe"), None),
    ("A lantern hanging above a sleeping fox", {"lantern": 1, "fox": 1}, ("lantern", "above", "fox"), None),
    (
        "A yellow taxi parked behind a fire hydrant",
        {"taxi": 1, "hydrant": 1},
        ("taxi", "behind", "hydrant"),
        None,
    ),
    ("A tortoise crawls from right to left across a patio", {"tortoise": 1}, None, ("tortoise", "left")),
    ("Four candles and two mugs on a kitchen counter", {"candle": 4, "mug": 2, "counter": 1}, None, None),
    ("A violin resting under a grand piano", {"violin": 1, "piano": 1}, ("violin", "under", "piano"), None),
    ("A hawk soaring upwards over a canyon", {"hawk": 1}, None, ("hawk", "up")),
    ("A skier sliding down a snowy mountain", {"skier": 1}, None, ("skier", "down")),
    (
        "A green parrot perched on a rusty mailbox",
        {"parrot": 1, "mailbox": 1},
        ("parrot", "on", "mailbox"),
        None,
    ),
    (
        "Five balloons drift to the right above a fountain",
        {"balloon": 5, "fountain": 1},
        None,
        ("balloon", "right"),
    ),
    (
        "A boy in a striped shirt flying a kite on the right of a lighthouse",
        {"boy": 1, "kite": 1, "lighthouse": 1},
        ("boy", "right of", "lighthouse"),
        None,
    ),
    (
        "A cactus in front of an adobe house",
        {"cactus": 1, "house": 1},
        ("cactus", "in front of", "house"),
        None,
    ),
    ("Three penguins march leftwards across the ice", {"penguin": 3}, None, ("penguin", "left")),
    (
        "A red scooter next to a blue mailbox",
        {"scooter": 1, "mailbox": 1},
        ("scooter", "near", "mailbox"),
        None,
    ),
    ("A monkey juggling oranges while a parrot sings", {"monkey": 1, "orange": 1, "parrot": 1}, None, None),
    ("An owl sitting atop a stack of old books", {"owl": 1, "book": 1}, ("owl", "on", "book"), None),
    (
        "A goldfish swimming below a floating leaf",
        {"goldfish": 1, "leaf": 1},
        ("goldfish", "below", "leaf"),
        None,
    ),
    ("Six sparrows on a telephone wire", {"sparrow": 6, "wire": 1}, ("sparrow", "on", "wire"), None),
    (
        "A tractor drives from left to right past a red barn",
        {"tractor": 1, "barn": 1},
        None,
        ("tractor", "right"),
    ),
    ("A child with a yellow raincoat jumping into a puddle", {"child": 1, "puddle": 1}, None, None),
    (
        "A teapot on the left of two porcelain cups",
        {"teapot": 1, "cup": 2},
        ("teapot", "left of", "cup"),
        None,
    ),
    ("A hot air balloon descending toward a green field", {"balloon": 1}, None, ("balloon", "down")),
    (
        "A dragon flying above a medieval castle",
        {"dragon": 1, "castle": 1},
        ("dragon", "above", "castle"),
        None,
    ),
    ("Seven ducklings follow their mother across a road", {"duckling": 7, "mother": 1}, None, None),
    (
        "A bicycle leaning against a brick wall under a streetlamp",
        {"bicycle": 1, "wall": 1, "streetlamp": 1},
        None,
        None,
    ),
    ("A snowman standing behind two sleds", {"snowman": 1, "sled": 2}, ("snowman", "behind", "sled"), None),
    ("A rocket rises into the night sky", {"rocket": 1}, None, ("rocket", "up")),
    (
        "A squirrel hides beneath a wooden bench",
        {"squirrel": 1, "bench": 1},
        ("squirrel", "under", "bench"),
        None,
    ),
    (
        "A firefighter holding a hose near a burning truck",
        {"firefighter": 1, "hose": 1, "truck": 1},
        None,
        None,
    ),
]


# A second held-out set, written after all tuning on T2V-CompBench and the set above, measured once:
# subjects+counts 38/39, relations+motion 13/18. The misses ("to the right of" read as motion, "in shining armor",
# "sinks below", "places a cake on a tray", "taxis") led to fixes; both sets now pass fully.
HELD2 = [  # fmt: skip
    ("2 puppies chase a red frisbee across the lawn", {"puppy": 2, "frisbee": 1}, None, None),
    (
        "A lamp is placed to the right of a stack of books",
        {"lamp": 1, "book": 1},
        ("lamp", "right of", "book"),
        None,
    ),
    ("The orange cat sleeps under a wooden chair", {"cat": 1, "chair": 1}, ("cat", "under", "chair"), None),
    ("Eight marbles roll to the left on a glass table", {"marble": 8, "table": 1}, None, ("marble", "left")),
    (
        "A silver airplane flies above three white clouds",
        {"airplane": 1, "cloud": 3},
        ("airplane", "above", "cloud"),
        None,
    ),
    (
        "A knight in shining armor stands in front of a dark castle",
        {"knight": 1, "castle": 1},
        ("knight", "in front of", "castle"),
        None,
    ),
    ("Butterflies flutter upwards from a field of tulips", {"butterfly": 1}, None, ("butterfly", "up")),
    ("A pelican dives downward into the sea", {"pelican": 1}, None, ("pelican", "down")),
    (
        "Four sheep and a sheepdog walk past an old windmill",
        {"sheep": 4, "sheepdog": 1, "windmill": 1},
        None,
        None,
    ),
    (
        "A yellow submarine sinks below a green jellyfish",
        {"submarine": 1, "jellyfish": 1},
        ("submarine", "below", "jellyfish"),
        ("submarine", "down"),
    ),
    (
        "A chef places a cake on a silver tray",
        {"chef": 1, "cake": 1, "tray": 1},
        ("cake", "on", "tray"),
        None,
    ),
    ("A white horse gallops from right to left across a beach", {"horse": 1}, None, ("horse", "left")),
    (
        "Two robots stand on the left side of a blue door",
        {"robot": 2, "door": 1},
        ("robot", "left of", "door"),
        None,
    ),
    (
        "A tiny mouse hides behind a huge pumpkin",
        {"mouse": 1, "pumpkin": 1},
        ("mouse", "behind", "pumpkin"),
        None,
    ),
    (
        "A hummingbird hovers near a purple flower",
        {"hummingbird": 1, "flower": 1},
        ("hummingbird", "near", "flower"),
        None,
    ),
    ("Three yellow taxis drive rightwards down a busy avenue", {"taxi": 3}, None, ("taxi", "right")),
    (
        "A girl wearing a blue hat reads a book beside a fireplace",
        {"girl": 1, "book": 1, "fireplace": 1},
        None,
        None,
    ),
    ("A koala sits atop a eucalyptus branch", {"koala": 1, "branch": 1}, ("koala", "on", "branch"), None),
    ("Five cupcakes sit in a row on a plate", {"cupcake": 5, "plate": 1}, ("cupcake", "on", "plate"), None),
    (
        "A paper boat drifts to the right while a toy duck floats to the left",
        {"boat": 1, "duck": 1},
        None,
        ("boat", "right"),
    ),
]


def test_held_out_prompts():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root holds benchmarks/
    from benchmarks.planner_compbench import subject_heads

    found = total = rel_found = rel_total = 0
    misses = []
    for prompt, subjects, relation, motion in HELD + HELD2:
        layout = plan_layout(prompt)
        heads = subject_heads(layout)
        for head, count in subjects.items():
            total += 1
            found += heads.count(head) == count
            if heads.count(head) != count:
                misses.append((prompt, head, count, heads))
        wanted = []
        if relation:
            wanted.append((relation[0], relation[1], relation[2]))
        if motion:
            wanted.append((motion[0], f"moving {motion[1]}", None))
        for subj, rel, obj in wanted:
            rel_total += 1
            ok = any(
                r.relation == rel
                and heads[r.subject] == subj
                and (obj is None or (r.object is not None and heads[r.object] == obj))
                for r in layout.relations
            )
            rel_found += ok
            if not ok:
                misses.append((prompt, subj, rel, obj))
        for r in layout.relations:
            assert layout.relation_holds(r)
    assert found / total >= 0.95 and rel_found / rel_total >= 0.9, misses


def test_command_line_writes_layout_and_overlays(tmp_path, capsys):
    from vidlab.generation.planners.__main__ import main

    out = tmp_path / "plan"
    assert main(["a ball rolls from left to right above a red car", "--out", str(out), "--width", "64"]) == 0
    printed = Layout.from_json(capsys.readouterr().out)
    assert Layout.load(out / "layout.json").to_dict() == printed.to_dict()
    assert sorted(p.name for p in out.glob("*.png")) == ["layout_00_t0.00.png", "layout_01_t1.00.png"]
    assert main(["a dog", "--subjects", "cat"]) == 2
    assert "'cat'" in capsys.readouterr().err


def test_vertical_mover_travels_over_the_subject_it_relates_to():
    layout = plan_layout("A squirrel climbs upward on a tree")
    squirrel, tree = layout.subjects
    assert [r.relation for r in layout.relations] == ["moving up"]
    assert layout.meta["dropped_relations"] == [{"subject": 0, "relation": "on", "object": 1}]  # not at t=0
    t = tree.box_at(0)
    for when in (0.0, 1.0):
        b = squirrel.box_at(when)
        assert t[0] <= b[0] and b[2] <= t[2]  # in the tree's column, start to end
    assert squirrel.box_at(1)[1] < squirrel.box_at(0)[1]


@pytest.mark.parametrize(
    "prompt",
    [
        "a red circle to the left of a blue square",
        "a green star above a yellow triangle",
        "two purple circles",
        "a cyan square moving right",
    ],
)
def test_a_box_cap_shrinks_every_box_about_its_centre_and_keeps_the_relations(prompt):
    """``max_box`` (the subjects' size where it is known: the toy world's 0.34) caps each side of every keyframe's
    box and moves no centre, so every relation the uncapped layout keeps still holds."""
    free = plan_layout(prompt)
    capped = plan_layout(prompt, max_box=0.34)
    assert [s.phrase for s in capped.subjects] == [s.phrase for s in free.subjects]
    assert [r.to_dict() for r in capped.relations] == [r.to_dict() for r in free.relations]
    assert capped.meta["geometry"]["max_box"] == 0.34
    shrunk = False
    for a, b in zip(free.subjects, capped.subjects):
        for (ta, ba), (tb, bb) in zip(a.keyframes, b.keyframes):
            assert ta == tb and centre(bb) == pytest.approx(centre(ba))
            assert bb[2] - bb[0] <= 0.34 + 1e-9 and bb[3] - bb[1] <= 0.34 + 1e-9
            assert bb[2] - bb[0] == pytest.approx(min(0.34, ba[2] - ba[0]))
            shrunk |= (ba[2] - ba[0]) > 0.34 or (ba[3] - ba[1]) > 0.34
    assert shrunk or "two" in prompt  # the planner's cells are larger than a toy shape


def test_a_box_cap_that_parts_touching_boxes_drops_and_records_the_on_relation():
    """ "on" needs the boxes to touch; capped about their centres they part, so the relation is not claimed."""
    free = plan_layout("a cat sitting on a table")
    capped = plan_layout("a cat sitting on a table", max_box=0.34)
    assert [r.relation for r in free.relations] == ["on"]
    assert capped.relations == [] and [d["relation"] for d in capped.meta["dropped_relations"]] == ["on"]


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_an_impossible_box_cap_is_refused(bad):
    with pytest.raises(ValueError, match="max_box must be in"):
        plan_layout("a red circle", max_box=bad)
