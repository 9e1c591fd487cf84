"""A small T5/UMT5-style tokenizer built offline, for the tiny Wan pipeline and for tests.

It is a SentencePiece-style BPE model (Unigram training on a corpus this small prunes common words into
letters; BPE keeps them whole) with a Metaspace ("▁") pre-tokenizer, T5 ids (pad 0, eos 1,
unk 2), eos appended by a post-processor and ``model_max_length`` 512, trained in well under a second on a
built-in English corpus of colours, shapes, animals, objects, spatial and motion words, so real prompts split
into sensible pieces. Same inputs give the same tokenizer (training is deterministic).
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedTokenizerFast

PAD, EOS, UNK = "<pad>", "</s>", "<unk>"
DEFAULT_VOCAB_SIZE = 2000
MODEL_MAX_LENGTH = 512

COLOURS = (
    "red orange yellow green blue purple pink brown black white gray grey golden silver violet "
    "beige teal navy crimson turquoise transparent glowing bright dark pale"
).split()
SHAPES = (
    "round square circular rectangular triangular oval spherical cubic cube conical cylindrical "
    "hexagonal pyramidal oblong elliptical spiral flat star-shaped heart-shaped diamond-shaped"
).split()
MATERIALS = (
    "wooden metal metallic glass paper plastic leather silk velvet woolen stone marble ceramic "
    "crystal rubber copper iron porcelain bamboo denim linen cotton fluffy furry plush"
).split()
SIZES = "big small large tiny tall short little young old elderly ancient huge long".split()
ANIMALS = (
    "cat cats dog dogs bird birds horse horses cow cows sheep rabbit rabbits fox foxes wolf wolves "
    "bear bears lion lions tiger elephant elephants giraffe giraffes zebra zebras monkey monkeys "
    "panda penguin penguins seal seals dolphin dolphins shark sharks fish frog frogs duck ducks swan "
    "swans goose geese owl owls parrot parrots eagle bee bees butterfly butterflies squirrel squirrels "
    "deer mouse mice snail turtle turtles kangaroo camel llama goat goats pig chicken chicks puppy "
    "kitten kittens hedgehog raccoon bat deer leopard flamingo peacock ant ants beetle jellyfish"
).split()
PEOPLE = "man woman men women boy girl child children kid person people chef dancer artist".split()
OBJECTS = (
    "car cars bus truck bike bicycle motorcycle boat ship train plane airplane drone kite balloon "
    "ball table chair sofa bench lamp vase cup plate bowl book books box bag hat umbrella clock "
    "window door wall fence house building tree trees flower flowers cake apple apples banana "
    "bananas orange oranges pencil eraser bottle mirror pillow cushion towel suitcase piano guitar "
    "robot rocket sign tent fountain statue television refrigerator toaster basket candle lantern "
    "star stars heart hearts moon sun cloud clouds rock rocks leaf leaves river lake road bridge"
).split()
PLACES = "garden park forest field beach ocean sea sky room kitchen street city desert snow meadow".split()
SPATIAL = (
    "left right above below on under in front of behind near beside next to on top atop between "
    "inside outside over beneath side the of a an and with while as at to from into onto across "
    "towards toward around through past by"
).split()
MOTION = (
    "moving moves running runs walking walks flying flies rolling rolls swimming swims jumping "
    "jumps climbing climbs falling falls floating floats drifting drifts sliding slides sailing "
    "ascending descending rising rises sinking upwards downwards leftwards rightwards up down "
    "slowly gradually quickly"
).split()
NUMBERS = "one two three four five six seven eight nine ten".split()
COMMON = (
    "is are was be being it its their his her there this that these those who which what day night "
    "sunny rainy windy cozy busy quiet together each other playing play plays sitting sits standing "
    "stands lying holding eating drinking reading painting driving drives past picket shiny sunset "
    "morning evening water grass hill mountain pond stream wind light fire ice shape shaped color "
    "colour video scene background screen top bottom middle corner slowly timelapse gently softly"
).split()

_TEMPLATES = (
    "a {c} {a} {v} {s} a {m} {o}",
    "{n} {sz} {a} and a {sh} {o} in the {p}",
    "The {c} {o} is {s} the {m} {o2}",
    "A {sz} {pp} {v} {s} a {c} {a2} near the {p}",
    "{N} {c} {o}s {v} from left to right",
    "{w} {sz} {o} {w} {c} {p}, {w} {a}",
)


def _builtin_corpus() -> list[str]:
    """Deterministic sentences and word lists covering the vocabulary prompts use."""
    words = [
        *COLOURS,
        *SHAPES,
        *MATERIALS,
        *SIZES,
        *ANIMALS,
        *PEOPLE,
        *OBJECTS,
        *PLACES,
        *SPATIAL,
        *MOTION,
        *NUMBERS,
        *COMMON,
    ]
    lines = [" ".join(words), " ".join(w.capitalize() for w in words)]
    lists = {
        "c": COLOURS,
        "a": ANIMALS,
        "a2": ANIMALS[::-1],
        "v": MOTION,
        "s": SPATIAL,
        "m": MATERIALS,
        "o": OBJECTS,
        "o2": OBJECTS[::-1],
        "n": NUMBERS,
        "N": [w.capitalize() for w in NUMBERS],
        "sz": SIZES,
        "sh": SHAPES,
        "pp": PEOPLE,
        "p": PLACES,
        "w": COMMON,
    }
    # Stride through the lists with co-prime steps: varied, deterministic combinations.
    for i, template in itertools.product(range(400), _TEMPLATES):
        fill = {k: v[(i * (3 + 2 * j)) % len(v)] for j, (k, v) in enumerate(lists.items())}
        lines.append(template.format(**fill))
    return lines


def build_tiny_tokenizer(
    texts: Iterable[str] | None = None, vocab_size: int = DEFAULT_VOCAB_SIZE
) -> PreTrainedTokenizerFast:
    """Train a T5-style Unigram tokenizer on the built-in corpus (plus ``texts``) and wrap it for transformers."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    extra = tuple(texts) if texts is not None else ()
    # Each call gets its own objects (callers may change settings), built from the cached trained model.
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_train(extra, int(vocab_size))),
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        model_max_length=MODEL_MAX_LENGTH,
        padding_side="right",
    )


@lru_cache(maxsize=8)
def _train(extra: tuple[str, ...], vocab_size: int) -> str:
    """Train once per distinct input and return the tokenizer as JSON."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=UNK))
    # Like T5's converted tokenizer: collapse runs of spaces, then Metaspace with a prepended "▁".
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(r"\s+", " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, EOS, UNK],
        initial_alphabet=list(string.ascii_letters + string.digits + string.punctuation),
        show_progress=False,
    )
    tok.train_from_iterator([*_builtin_corpus(), *extra], trainer=trainer)
    eos_id = tok.token_to_id(EOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS}", pair=f"$A {EOS} $B {EOS}", special_tokens=[(EOS, eos_id)]
    )
    if (tok.token_to_id(PAD), eos_id, tok.token_to_id(UNK)) != (0, 1, 2):
        raise RuntimeError("tiny tokenizer: special token ids must be T5's (pad 0, eos 1, unk 2)")
    return tok.to_str()
