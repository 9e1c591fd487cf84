"""A prompt with words the toy-world model never saw is refused before the model loads, naming the words
(it used to fail after a 68 s load with "lies beyond the tokenizer's max_length=512")."""

from __future__ import annotations

import pytest

from vidlab.errors import UserError
from vidlab.generation.toyworld.tokenizer import UnknownWordsError, check_prompt_words, unknown_words


@pytest.fixture
def toy_dir():
    from pathlib import Path

    import vidlab.generation.toyworld

    return Path(vidlab.generation.toyworld.__file__).parent / "weights"  # the shipped toy-world pipeline


def test_unknown_words_are_read_from_the_saved_tokenizer(toy_dir):
    tok = f"{toy_dir}/tokenizer/tokenizer.json"
    assert unknown_words("A red circle to the LEFT of a blue square", tok) == []
    assert unknown_words("a red dog to the left of a blue dog, jumping", tok) == ["dog", ",", "jumping"]


def test_check_names_the_words_and_the_vocabulary(toy_dir):
    with pytest.raises(UnknownWordsError) as e:
        check_prompt_words("a red dog above a blue cat", toy_dir, "toyworld")
    assert isinstance(e.value, UserError)
    msg = str(e.value)
    assert "'dog', 'cat'" in msg and "circle" in msg and "max_length" not in msg
    check_prompt_words("two red circles above a blue square", toy_dir, "toyworld")


def test_subword_pipelines_pass_unchecked(tmp_path):
    (tmp_path / "tokenizer").mkdir()
    (tmp_path / "tokenizer" / "tokenizer.json").write_text('{"model": {"type": "Unigram", "vocab": []}}')
    check_prompt_words("anything at all", tmp_path)
    check_prompt_words("anything at all", tmp_path / "no-such-folder")


def test_vidlab_generate_refuses_before_loading(monkeypatch, tmp_path, capsys):
    import vidlab.generation.cli as gcli
    import vidlab.generation.pipeline as gpipe
    from vidlab.cli import main

    def no_load(*a, **kw):
        raise AssertionError("the model was loaded before the prompt was checked")

    monkeypatch.setattr(gcli, "load_pipeline", no_load)
    monkeypatch.setattr(gpipe, "load_pipeline", no_load)
    rc = main(["generate", "a red dog to the left of a blue square", "--preset", "generate/toyworld",
               "--out", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "'dog'" in err[0]
    assert not (tmp_path / "o").exists()
