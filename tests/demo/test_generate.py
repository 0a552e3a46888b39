"""The generator against the parser, style reader and checker: what it chose is what they see."""

import random
from collections import Counter

import pytest

from demo.domain import DIMENSIONS, Ask, Edit, check_edit, parse_response, render_prompt
from demo.domain.generate import (
    EDIT_RATE_AMBIGUOUS, EDIT_RATE_CLEAR, sample_labelled_response, sample_prompt, sample_response, sample_style,
)

SAMPLES = 4000


def labelled_samples(seed: int = 0, ambiguous_rate: float = 0.3):
    rng = random.Random(seed)
    for _ in range(SAMPLES):
        prompt = sample_prompt(rng, ambiguous_rate)
        yield prompt, sample_labelled_response(rng, prompt)


def test_the_parser_style_reader_and_checker_agree_with_what_the_generator_chose():
    for prompt, sampled in labelled_samples():
        response = parse_response(sampled.text)
        if sampled.kind == "ask":
            assert isinstance(response, Ask)
            continue
        assert response == Edit(sampled.file, response.code)
        verdict = check_edit(response, prompt)
        assert verdict.right_function and verdict.correct_body
        assert verdict.right_file == (not prompt.ambiguous)
        assert verdict.style == sampled.style


def test_clear_prompts_get_mostly_edits_and_ambiguous_ones_mostly_asks():
    edits = Counter()
    prompts = Counter()
    for prompt, sampled in labelled_samples(seed=1, ambiguous_rate=0.5):
        prompts[prompt.ambiguous] += 1
        edits[prompt.ambiguous] += sampled.kind == "edit"
    assert edits[False] / prompts[False] == pytest.approx(EDIT_RATE_CLEAR, abs=0.03)
    assert edits[True] / prompts[True] == pytest.approx(EDIT_RATE_AMBIGUOUS, abs=0.03)


def test_an_edit_on_an_ambiguous_prompt_guesses_a_file():
    samples = labelled_samples(seed=2, ambiguous_rate=1.0)
    guesses = {sampled.file for _, sampled in samples if sampled.kind == "edit"}
    assert len(guesses) == 5


def test_every_style_value_is_drawn_about_uniformly():
    rng = random.Random(3)
    drawn = [sample_style(rng) for _ in range(SAMPLES)]
    for name, values in DIMENSIONS.items():
        counts = Counter(getattr(style, name) for style in drawn)
        assert set(counts) == set(values)
        assert all(count / SAMPLES == pytest.approx(1 / len(values), abs=0.04) for count in counts.values())


def test_the_ambiguous_rate_is_the_share_of_prompts_with_no_file():
    rng = random.Random(4)
    ambiguous = sum(sample_prompt(rng, 0.25).ambiguous for _ in range(SAMPLES))
    assert ambiguous / SAMPLES == pytest.approx(0.25, abs=0.03)


def test_the_same_seed_gives_the_same_corpus():
    def corpus(seed: int) -> list[tuple[str, str]]:
        rng = random.Random(seed)
        pairs = []
        for _ in range(50):
            prompt = sample_prompt(rng)
            pairs.append((render_prompt(prompt), sample_response(rng, prompt)))
        return pairs

    assert corpus(7) == corpus(7)
    assert corpus(7) != corpus(8)
