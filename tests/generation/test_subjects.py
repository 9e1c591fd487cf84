"""Subject phrases -> token positions, on the tiny tokenizer and on a real SentencePiece T5 tokenizer trained here."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vidlab.generation.layout import SubjectLayout
from vidlab.generation.subjects import (
    SubjectNotFoundError,
    find_phrase_span,
    find_phrase_spans,
    subject_token_indices,
)
from vidlab.generation.tiny_tokenizer import _builtin_corpus, _train, build_tiny_tokenizer


@pytest.fixture(scope="module")
def tiny():
    return build_tiny_tokenizer()


@pytest.fixture(scope="module")
def t5_spm(tmp_path_factory):
    """A real T5 tokenizer: a SentencePiece unigram model trained locally, loaded through transformers' T5 class."""
    spm = pytest.importorskip("sentencepiece")
    from transformers import T5Tokenizer

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_builtin_corpus()),
        model_writer=buf,
        vocab_size=500,
        model_type="unigram",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    d = tmp_path_factory.mktemp("spm")
    (d / "spiece.model").write_bytes(buf.getvalue())
    tok = T5Tokenizer.from_pretrained(str(d), extra_ids=0)
    assert len(tok) == 500 and (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    return tok


# ---- the tiny tokenizer -----------------------------------------------------------------------------
def test_tiny_tokenizer_is_t5_style(tiny):
    assert (tiny.pad_token_id, tiny.eos_token_id, tiny.unk_token_id) == (0, 1, 2)
    assert tiny.model_max_length == 512
    enc = tiny("a red cat", return_offsets_mapping=True)
    assert enc["input_ids"][-1] == 1  # eos appended by the post-processor
    assert tiny.convert_ids_to_tokens(enc["input_ids"][:-1]) == ["▁a", "▁red", "▁cat"]
    padded = tiny(["a cat"], padding="max_length", max_length=8, truncation=True)
    assert padded["input_ids"][0][-1] == 0 and padded["attention_mask"][0][-1] == 0
    assert tiny.decode(enc["input_ids"], skip_special_tokens=True) == "a red cat"


def test_tiny_tokenizer_is_deterministic():
    # Its build time is a figure of benchmarks/failure_paths.py, not a test assertion.
    _train.cache_clear()
    a = build_tiny_tokenizer()
    _train.cache_clear()
    b = build_tiny_tokenizer()
    assert a.get_vocab() == b.get_vocab()
    # Each call returns its own object: changing one does not change the next.
    a.model_max_length = 7
    assert build_tiny_tokenizer().model_max_length == 512


def test_tiny_tokenizer_extra_texts_change_vocab():
    base = build_tiny_tokenizer()
    extra = build_tiny_tokenizer(["zorblax zorblax zorblax quuxite quuxite"] * 50)
    assert "▁zorblax" in extra.get_vocab() and "▁zorblax" not in base.get_vocab()


def test_tiny_tokenizer_splits_prompt_words_sensibly(tiny):
    pieces = tiny.tokenize("three dogs and two cats on the left of a blue car")
    assert pieces == [
        "▁three",
        "▁dogs",
        "▁and",
        "▁two",
        "▁cats",
        "▁on",
        "▁the",
        "▁left",
        "▁of",
        "▁a",
        "▁blue",
        "▁car",
    ]


# ---- find_phrase_span -------------------------------------------------------------------------------
def test_find_phrase_span_case_and_word_boundaries():
    p = "A Category of cats: the cat sat near a black  cat."
    assert find_phrase_span(p, "cat") == (24, 27)  # not inside "Category" or "cats"
    assert find_phrase_span(p, "CAT", start=27) == (p.index("cat."), p.index("cat.") + 3)
    s, e = find_phrase_span(p, "black cat")  # runs of spaces in the prompt still match
    assert p[s:e] == "black  cat"


def test_subject_not_found_error_names_phrase_and_prompt():
    with pytest.raises(SubjectNotFoundError) as info:
        find_phrase_span("a red car", "blue car")
    err = info.value
    assert isinstance(err, ValueError)
    assert err.phrase == "blue car" and err.prompt == "a red car"
    assert "'blue car'" in str(err) and "'a red car'" in str(err)


def test_repeated_phrases_take_successive_occurrences():
    p = "a cat chases a dog and a cat"
    assert find_phrase_spans(p, ["cat", "dog", "cat"]) == [(2, 5), (15, 18), (25, 28)]
    with pytest.raises(SubjectNotFoundError, match="after character"):
        find_phrase_spans(p, ["cat", "cat", "cat"])


def test_counted_copies_share_their_span():
    p = "three cats play with a cat"
    copies = [SubjectLayout("cats", [(0, (0, 0, 0.5, 0.5))], count_index=k) for k in range(3)]
    single = SubjectLayout("cat", [(0, (0.5, 0.5, 1, 1))])
    assert find_phrase_spans(p, [*copies, single]) == [(6, 10)] * 3 + [(23, 26)]


def test_explicit_span_must_match_phrase():
    s = SubjectLayout("cat", [(0, (0, 0, 1, 1))], span=(0, 3))
    with pytest.raises(SubjectNotFoundError, match="span 0:3"):
        find_phrase_spans("a cat", [s])


# ---- token indices ----------------------------------------------------------------------------------
def _decoded(tok, prompt, idx):
    ids = tok(prompt)["input_ids"]
    return tok.decode([ids[i] for i in idx]).strip().lower()


@pytest.mark.parametrize("which", ["tiny", "t5_spm"])
def test_token_indices_cover_exactly_the_phrase(which, request):
    tok = request.getfixturevalue(which)
    prompt = "A Blue car drives past a white picket fence, and a blue car parks"
    idx = subject_token_indices(tok, prompt, ["blue car", "white picket fence", "blue car"])
    assert _decoded(tok, prompt, idx[0]) == "blue car"
    assert _decoded(tok, prompt, idx[1]) == "white picket fence"
    assert _decoded(tok, prompt, idx[2]) == "blue car"
    assert idx[0] != idx[2] and max(idx[0]) < min(idx[1]) < max(idx[1]) < min(idx[2])
    for ids in idx:
        assert ids == list(range(ids[0], ids[-1] + 1))  # contiguous
    eos = len(tok(prompt)["input_ids"]) - 1
    assert all(eos not in ids for ids in idx)  # special tokens never count


def test_t5_offsets_with_leading_space_pieces(t5_spm):
    """SentencePiece splits a rare capitalised word into a lone "▁" plus letters; the phrase keeps its letters."""
    prompt = "a Blue whale"
    pieces = t5_spm.convert_ids_to_tokens(t5_spm(prompt)["input_ids"])
    assert "▁" in pieces  # the case this test is about
    idx = subject_token_indices(t5_spm, prompt, ["blue"])[0]
    assert _decoded(t5_spm, prompt, idx) == "blue"


def test_token_indices_respect_max_length(tiny):
    prompt = "a red cat " * 10 + "and a green dog"
    assert subject_token_indices(tiny, prompt, ["green dog"])[0]
    with pytest.raises(SubjectNotFoundError, match="max_length=12"):
        subject_token_indices(tiny, prompt, ["green dog"], max_length=12)


def test_missing_subject_in_token_lookup(tiny):
    with pytest.raises(SubjectNotFoundError, match="'zebra'"):
        subject_token_indices(tiny, "a red cat", ["cat", "zebra"])


WORDS = ["red", "cat", "blue", "dog", "tall", "tree", "on", "the", "left", "of", "wooden", "table", "zebra"]


@settings(max_examples=30, deadline=None)
@given(words=st.lists(st.sampled_from(WORDS), min_size=2, max_size=12), data=st.data())
def test_any_phrase_maps_back_to_itself(words, data):
    """Property: for any run of words in any prompt, the tokens found decode to exactly that run."""
    tok = build_tiny_tokenizer()
    prompt = " ".join(words)
    i = data.draw(st.integers(0, len(words) - 1))
    j = data.draw(st.integers(i + 1, len(words)))
    phrase = " ".join(words[i:j])
    # The first occurrence of the phrase may be earlier than i; compare with what find_phrase_span picks.
    s, e = find_phrase_span(prompt, phrase)
    idx = subject_token_indices(tok, prompt, [phrase])[0]
    assert _decoded(tok, prompt, idx) == prompt[s:e]


def test_tokenizer_without_offsets_is_a_clear_error():
    class NoOffsets:  # e.g. a slow (pure-Python) tokenizer: it cannot return offsets
        def __call__(self, text, **kw):
            raise NotImplementedError("return_offset_mapping is not available when using Python tokenizers")

    with pytest.raises(TypeError, match="fast tokenizer with offset mapping; NoOffsets"):
        subject_token_indices(NoOffsets(), "a cat", ["cat"])


def test_the_model_text_length_is_wans_512_unless_the_tokenizer_says_less():
    from types import SimpleNamespace

    from vidlab.generation.subjects import model_text_length

    assert model_text_length(build_tiny_tokenizer()) == 512
    assert model_text_length(SimpleNamespace(model_max_length=16)) == 16
    assert model_text_length(SimpleNamespace(model_max_length=int(1e30))) == 512  # transformers' "no limit"
    assert model_text_length(SimpleNamespace()) == 512
    assert model_text_length(SimpleNamespace(model_max_length=16), 64) == 64  # an explicit request wins
