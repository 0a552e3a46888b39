import warnings

import pytest

from demo.domain import Ask, Edit, Invalid, Reason, parse_response, render_ask, render_edit

CODE = "def sum_list(xs: list[int]) -> int:\n    return sum(xs)"


def test_the_edit_of_the_spec_parses_as_an_edit_of_its_file_and_code():
    text = '<edit file="utils.py">\n' + CODE + "\n</edit>"
    assert parse_response(text) == Edit("utils.py", CODE)


def test_render_edit_writes_exactly_the_format_of_the_spec():
    assert render_edit("utils.py", CODE) == '<edit file="utils.py">\n' + CODE + "\n</edit>"


def test_an_ask_parses_as_its_one_line_of_text():
    assert parse_response("<ask>Which file should I edit?</ask>") == Ask("Which file should I edit?")
    assert parse_response(render_ask("Which file?")) == Ask("Which file?")


def test_whitespace_around_the_tool_call_is_forgiven():
    assert parse_response("\n  " + render_edit("core.py", CODE) + "\n\n") == Edit("core.py", CODE)
    assert parse_response(" <ask>\n  Which file?  \n</ask> ") == Ask("Which file?")


def test_a_wellformed_edit_to_any_file_name_is_valid():
    assert parse_response(render_edit("elsewhere.py", CODE)) == Edit("elsewhere.py", CODE)


def test_comments_and_blank_lines_around_the_function_are_no_statements():
    code = "# the total\n\ndef sum_list(xs):\n    return sum(xs)  # builtin\n"
    assert isinstance(parse_response(render_edit("utils.py", code)), Edit)


def edit(code: str, opening: str = '<edit file="utils.py">') -> str:
    return f"{opening}\n{code}\n</edit>"


INVALID = {
    "an empty response": ("", Reason.NO_TOOL_CALL),
    "plain prose": ("I would use sum().", Reason.NO_TOOL_CALL),
    "text before the tag": ("Sure! " + edit(CODE), Reason.TEXT_OUTSIDE),
    "text after the tag": (edit(CODE) + "\nHope this helps.", Reason.TEXT_OUTSIDE),
    "text after an ask": ("<ask>Which file?</ask> thanks", Reason.TEXT_OUTSIDE),
    "another tag": ("<run>pytest</run>", Reason.UNKNOWN_TAG),
    "a capitalised tag": (edit(CODE, '<Edit file="utils.py">').replace("</edit>", "</Edit>"), Reason.UNKNOWN_TAG),
    "an edit never closed": ('<edit file="utils.py">\n' + CODE, Reason.UNCLOSED_TAG),
    "an ask never closed": ("<ask>Which file?", Reason.UNCLOSED_TAG),
    "two edits": (edit(CODE) + "\n" + edit(CODE), Reason.MULTIPLE_CALLS),
    "an edit and an ask": (edit(CODE) + "<ask>Right file?</ask>", Reason.MULTIPLE_CALLS),
    "an edit without a file": (edit(CODE, "<edit>"), Reason.MISSING_FILE),
    "an edit with a path instead": (edit(CODE, '<edit path="utils.py">'), Reason.MISSING_FILE),
    "an edit with an empty file": (edit(CODE, '<edit file="">'), Reason.EMPTY_FILE),
    "an edit with a blank file": (edit(CODE, '<edit file="  ">'), Reason.EMPTY_FILE),
    "a file in single quotes": (edit(CODE, "<edit file='utils.py'>"), Reason.MALFORMED_TAG),
    "a second attribute": (edit(CODE, '<edit file="utils.py" mode="append">'), Reason.MALFORMED_TAG),
    "an ask with an attribute": ('<ask to="user">Which file?</ask>', Reason.MALFORMED_TAG),
    "an empty ask": ("<ask></ask>", Reason.EMPTY_ASK),
    "a blank ask": ("<ask>  \n </ask>", Reason.EMPTY_ASK),
    "an ask of two lines": ("<ask>Which file?\nAnd which name?</ask>", Reason.MULTILINE_ASK),
    "code that does not parse": (edit("def sum_list(xs):\nreturn sum(xs)"), Reason.SYNTAX_ERROR),
    "code with a null byte": (edit("def f(x):\n    return '\0'"), Reason.SYNTAX_ERROR),
    "an empty edit": (edit(""), Reason.NOT_ONE_FUNCTION),
    "code without a function": (edit("total = sum(xs)"), Reason.NOT_ONE_FUNCTION),
    "two functions": (edit(CODE + "\n\n" + CODE.replace("sum_list", "total")), Reason.NOT_ONE_FUNCTION),
    "a function inside a class": (edit("class Tools:\n    " + CODE.replace("\n", "\n    ")), Reason.NOT_ONE_FUNCTION),
    "an import besides the function": (edit("import math\n" + CODE), Reason.EXTRA_STATEMENT),
    "a module docstring besides the function": (edit('"""Sums."""\n' + CODE), Reason.EXTRA_STATEMENT),
    "a call after the function": (edit(CODE + "\nprint(sum_list([1]))"), Reason.EXTRA_STATEMENT),
}


@pytest.mark.parametrize("text, reason", INVALID.values(), ids=INVALID.keys())
def test_each_kind_of_invalid_call_is_recognised_with_its_reason(text, reason):
    response = parse_response(text)
    assert isinstance(response, Invalid)
    assert response.reason == reason
    assert response.message


def test_every_reason_is_exercised_by_an_example():
    assert {reason for _, reason in INVALID.values()} == set(Reason)


def test_each_reason_has_a_message_of_its_own():
    messages = {parse_response(text).message.split(":")[0] for text, _ in INVALID.values()}
    assert len(messages) == len(Reason)


@pytest.mark.parametrize("file", ["", "  ", 'a"b.py', "a\nb.py"])
def test_render_edit_refuses_a_file_name_the_grammar_cannot_carry(file):
    with pytest.raises(ValueError):
        render_edit(file, CODE)


@pytest.mark.parametrize("text", ["", " ", "one\ntwo", "a </ask> b"])
def test_render_ask_refuses_anything_but_one_line(text):
    with pytest.raises(ValueError):
        render_ask(text)


def test_parsing_untrusted_code_raises_no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(parse_response(edit('def find(s):\n    return s.split("\\d")')), Edit)
