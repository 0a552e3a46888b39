"""The checker against the catalogue: every correct variant passes, every mutation is caught."""

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from demo.domain import (
    TASKS, Edit, Prompt, Style, check_edit, parse_response, render_edit, render_function, task_by_words,
)

from .strategies import files, styles, tasks

SNAKE_HINTED = Style(naming="snake", indent="4", docstring="yes", hints="yes")


def edit_of(task, style, file) -> Edit:
    response = parse_response(render_edit(file, render_function(task, style)))
    assert isinstance(response, Edit)
    return response


def verdict_on(code: str, words: str = "sum list", file: str | None = "utils.py"):
    return check_edit(Edit("utils.py", code), Prompt(task_by_words(words), file))


@given(tasks, styles, files)
def test_every_catalogue_function_in_every_style_to_its_file_is_a_correct_edit(task, style, file):
    verdict = check_edit(edit_of(task, style, file), Prompt(task, file))
    assert verdict.right_file and verdict.right_function and verdict.correct_body
    assert verdict.correct
    assert verdict.style == style


@given(tasks, styles, files, st.data())
def test_another_tasks_body_is_caught_as_a_wrong_body(task, style, file, data):
    other = data.draw(st.sampled_from([t for t in TASKS if t.body != task.body]))
    verdict = check_edit(edit_of(dataclasses.replace(task, body=other.body), style, file), Prompt(task, file))
    assert verdict.right_function and not verdict.correct_body and not verdict.correct


@given(tasks, styles, files, st.data())
def test_another_tasks_name_is_caught_as_a_wrong_function(task, style, file, data):
    other = data.draw(st.sampled_from([t for t in TASKS if t.words != task.words]))
    verdict = check_edit(edit_of(dataclasses.replace(task, words=other.words), style, file), Prompt(task, file))
    assert verdict.correct_body and not verdict.right_function and not verdict.correct


@given(tasks, styles, files, files)
def test_an_edit_to_another_file_is_caught_as_the_wrong_file(task, style, file, prompted):
    verdict = check_edit(edit_of(task, style, file), Prompt(task, prompted))
    assert verdict.right_file == (file == prompted)
    assert verdict.correct == (file == prompted)


@given(tasks, styles, files)
def test_any_edit_on_an_ambiguous_prompt_is_to_the_wrong_file(task, style, file):
    verdict = check_edit(edit_of(task, style, file), Prompt(task, None))
    assert not verdict.right_file and not verdict.correct


@given(tasks, styles, files)
def test_renamed_parameters_are_caught_as_a_wrong_body(task, style, file):
    renamed = tuple(dataclasses.replace(param, name=param.name + "_") for param in task.params)
    verdict = check_edit(edit_of(dataclasses.replace(task, params=renamed), style, file), Prompt(task, file))
    assert not verdict.correct_body


def test_a_wrong_hint_is_caught_as_a_wrong_body():
    wrong_return = dataclasses.replace(task_by_words("sum list"), returns="float")
    verdict = check_edit(edit_of(wrong_return, SNAKE_HINTED, "utils.py"), Prompt(task_by_words("sum list"), "utils.py"))
    assert not verdict.correct_body


def test_spacing_quotes_parentheses_and_the_docstrings_text_do_not_matter():
    code = "def join_words(words):\n    'Joins.'\n    return (' '.join( words ))"
    assert verdict_on(code, "join words").correct


def test_partly_hinted_code_is_correct_when_its_hints_are_the_catalogues():
    assert verdict_on("def add_numbers(a: int, b):\n    return a + b", "add numbers").correct_body


def test_an_equivalent_but_different_body_is_not_the_catalogues():
    assert not verdict_on("def sum_list(xs):\n    total = sum(xs)\n    return total").correct_body
    assert not verdict_on("def square_number(n):\n    return n ** 2", "square number").correct_body


def test_extra_parameters_defaults_and_decorators_are_wrong_bodies():
    assert not verdict_on("def sum_list(xs, start):\n    return sum(xs)").correct_body
    assert not verdict_on("def sum_list(xs=()):\n    return sum(xs)").correct_body
    assert not verdict_on("def sum_list(*xs):\n    return sum(xs)").correct_body
    assert not verdict_on("@cache\ndef sum_list(xs):\n    return sum(xs)").correct_body
    assert not verdict_on("async def sum_list(xs):\n    return sum(xs)").correct_body


def test_a_function_named_in_either_style_is_the_right_function_and_nothing_else_is():
    assert verdict_on("def sumList(xs):\n    return sum(xs)").right_function
    assert not verdict_on("def SumList(xs):\n    return sum(xs)").right_function
    assert not verdict_on("def sumlist(xs):\n    return sum(xs)").right_function


def test_the_checker_never_runs_the_code(tmp_path):
    witness = tmp_path / "ran"
    verdict = verdict_on(f"@open({str(witness)!r}, 'w').close\ndef sum_list(xs):\n    return sum(xs)")
    assert not verdict.correct_body
    assert not witness.exists()
