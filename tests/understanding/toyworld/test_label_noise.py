"""Classification label noise in the toy world: a Direct label whose initial view cannot show the answer is a
lucky guess; the shifted initial views' rule is compared with the one-view rule on the same samples."""

from types import SimpleNamespace

from vidlab.understanding.agents import linspace_frames
from vidlab.understanding.classify import ClassifyConfig
from vidlab.understanding.toyworld.train import label_noise, single_view_labels
from vidlab.understanding.toyworld.world import WorldConfig, evidence_in_view, questions, video_spec

CFG = WorldConfig(min_frames=300, max_frames=900)
WORLD = SimpleNamespace(cfg=SimpleNamespace(world=CFG))


def _row(seed: int, kind: str, label: str, views: list[float], rich: float) -> dict:
    spec = video_spec(seed, CFG)
    row = next(r for r in questions(spec, f"videos/{seed:06d}.mp4") if r["category"] == kind)
    info = {"acc_initial": sum(views) / len(views), "acc_rich": rich, "acc_initial_views": views}
    return {**row, "classification": label, "classification_info": info}


def _seeds(seen: bool) -> list[int]:
    out = []
    for s in range(200):
        spec = video_spec(s, CFG)
        if evidence_in_view(spec, "needle", linspace_frames(0, spec.num_frames, 16)) == seen:
            out.append(s)
    return out


def test_lucky_direct_labels_are_counted_and_the_one_view_rule_is_recovered():
    hidden, shown = _seeds(False), _seeds(True)
    assert len(hidden) >= 2 and shown
    rows = [
        # a lucky guess: right on the reference grid only -> Active under 4 views, Direct under the one-view rule
        _row(hidden[0], "needle", "active", [1.0, 0.0, 0.0, 0.0], 1.0),
        # a guess that every view repeats stays Direct (the rule cannot see it): still counted as noise
        _row(hidden[1], "needle", "direct", [1.0, 1.0, 1.0, 1.0], 1.0),
        # the triangle is on the reference grid only: the 4-view rule gives up this Direct label
        _row(shown[0], "needle", "active", [1.0, 0.25, 0.0, 0.0], 1.0),
        _row(hidden[0], "static", "direct", [1.0] * 4, 1.0),
    ]
    after = label_noise(WORLD, rows)
    before = label_noise(WORLD, single_view_labels(rows, ClassifyConfig(initial_views=4)))
    assert after["needle"]["labels"] == {"active": 2, "direct": 1}
    assert after["needle"]["direct_without_evidence"] == 1 and after["needle"]["direct_with_evidence"] == 0
    assert after["needle"]["not_direct_with_evidence"] == 1 and after["needle"]["direct_noise"] == 1.0
    assert before["needle"]["labels"] == {"direct": 3}
    assert before["needle"]["direct_without_evidence"] == 2 and before["needle"]["direct_with_evidence"] == 1
    assert before["needle"]["direct_noise"] == round(2 / 3, 4)
    assert after["static"]["direct_with_evidence"] == 1 and after["static"]["direct_noise"] == 0.0
    assert after["all"]["direct_without_evidence"] == 1 and before["all"]["direct_without_evidence"] == 2
    # rows labelled with one initial view keep their label
    one = [{**rows[0], "classification_info": {"acc_initial": 1.0, "acc_rich": 1.0}}]
    assert single_view_labels(one, ClassifyConfig())[0]["classification"] == "active"
