from dataclasses import fields

import pytest
from hypothesis import given

from demo.domain import DIMENSIONS, Style, function_name, read_style, render_function, task_by_words

from .strategies import styles, tasks


def test_the_style_has_one_field_per_dimension_in_order():
    assert tuple(field.name for field in fields(Style)) == tuple(DIMENSIONS)


def test_a_value_outside_its_dimension_is_refused():
    with pytest.raises(ValueError, match="indent"):
        Style(naming="snake", indent="3", docstring="yes", hints="yes")


def test_names_are_formed_from_the_words_by_the_naming_style():
    assert function_name("sum list", "snake") == "sum_list"
    assert function_name("sum list", "camel") == "sumList"
    assert function_name("to upper", "camel") == "toUpper"


def test_the_example_of_the_spec_is_rendered_exactly():
    style = Style(naming="snake", indent="4", docstring="yes", hints="yes")
    assert render_function(task_by_words("sum list"), style) == (
        "def sum_list(xs: list[int]) -> int:\n"
        '    """Return the sum of the numbers in a list."""\n'
        "    return sum(xs)"
    )


def test_a_camel_tab_function_without_docstring_or_hints_is_rendered_exactly():
    style = Style(naming="camel", indent="tab", docstring="no", hints="no")
    assert render_function(task_by_words("add numbers"), style) == "def addNumbers(a, b):\n\treturn a + b"


def test_two_space_indents_every_body_line_by_two_spaces():
    style = Style(naming="snake", indent="2", docstring="yes", hints="no")
    assert render_function(task_by_words("is even"), style).splitlines()[1:] == [
        '  """Return whether a number is even."""',
        "  return n % 2 == 0",
    ]


def test_an_incomplete_style_cannot_be_written():
    with pytest.raises(ValueError):
        render_function(task_by_words("sum list"), Style(naming=None, indent="4", docstring="no", hints="no"))


@given(tasks, styles)
def test_read_style_gives_back_the_style_a_function_was_written_in(task, style):
    assert read_style(render_function(task, style)) == style


@pytest.mark.parametrize("code, dimension", [
    ("def total(xs):\n    return sum(xs)", "naming"),
    ("def Total_Sum(xs):\n    return sum(xs)", "naming"),
    ("def SumList(xs):\n    return sum(xs)", "naming"),
    ("def sum_list(xs): return sum(xs)", "indent"),
    ("def sum_list(xs):\n   return sum(xs)", "indent"),
    ("def sum_list(xs):\n        return sum(xs)", "indent"),
    ("def sum_list(xs: list[int]):\n    return sum(xs)", "hints"),
    ("def add_numbers(a: int, b) -> int:\n    return a + b", "hints"),
])
def test_a_dimension_the_code_does_not_tell_is_read_as_none(code, dimension):
    style = read_style(code)
    assert getattr(style, dimension) is None
    assert not style.complete
    assert all(getattr(style, other) is not None for other in DIMENSIONS if other != dimension)


def test_any_leading_string_literal_reads_as_a_docstring():
    assert read_style("def sum_list(xs):\n    'Sums.'\n    return sum(xs)").docstring == "yes"


def test_a_style_meets_preferences_only_with_the_values_read():
    style = read_style("def total(xs: list[int]) -> int:\n  return sum(xs)")
    assert style.meets({"indent": "2", "hints": "yes"})
    assert not style.meets({"indent": "4"})
    assert not style.meets({"naming": "snake"})  # unknown meets nothing
    assert style.meets({})


def test_reading_code_without_a_function_is_an_error():
    with pytest.raises(ValueError):
        read_style("x = 1")
