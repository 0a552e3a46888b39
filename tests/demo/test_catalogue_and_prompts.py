import pytest

from demo.domain import FILES, TASKS, Prompt, parse_prompt, render_prompt, task_by_words


def test_the_catalogue_holds_the_twelve_functions_of_the_spec_in_its_order():
    assert [task.words for task in TASKS] == [
        "sum list", "max value", "count items", "reverse text", "is even", "square number",
        "join words", "first item", "count vowels", "add numbers", "to upper", "average value",
    ]


def test_every_catalogue_function_is_named_by_two_words():
    assert all(len(task.words.split()) == 2 for task in TASKS)


def test_the_files_are_the_five_of_the_spec():
    assert FILES == ("utils.py", "helpers.py", "core.py", "tools.py", "main.py")


def test_a_task_is_found_by_its_words():
    assert task_by_words("add numbers").params[1].name == "b"
    with pytest.raises(KeyError):
        task_by_words("subtract numbers")


def test_a_clear_prompt_renders_as_the_three_lines_of_the_spec():
    prompt = Prompt(task_by_words("sum list"), "utils.py")
    assert render_prompt(prompt) == "Task: Return the sum of the numbers in a list.\nFunction: sum list\nFile: utils.py"


def test_an_ambiguous_prompt_names_its_file_as_a_question_mark():
    prompt = Prompt(task_by_words("to upper"), None)
    assert prompt.ambiguous
    assert render_prompt(prompt).endswith("\nFile: ?")


@pytest.mark.parametrize("file", [*FILES, None])
@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.words)
def test_every_prompt_parses_back_to_itself(task, file):
    prompt = Prompt(task, file)
    assert parse_prompt(render_prompt(prompt)) == prompt
    assert parse_prompt("\n" + render_prompt(prompt) + "\n") == prompt


@pytest.mark.parametrize("text, reason", [
    ("Task: Return the text reversed.\nFunction: reverse text", "3 lines"),
    ("Task: Return the text reversed.\nFunction: reverse text\nFile: a.py\nFile: b.py", "3 lines"),
    ("Goal: Return the text reversed.\nFunction: reverse text\nFile: utils.py", "'Task: '"),
    ("Task: Return the text reversed.\nFunction: flip text\nFile: utils.py", "no catalogue function"),
    ("Task: Return the text upside down.\nFunction: reverse text\nFile: utils.py", "is described as"),
    ("Task: Return the text reversed.\nFunction: reverse text\nFile: other.py", "unknown file"),
])
def test_a_text_that_is_not_exactly_a_prompt_is_refused_with_its_reason(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_prompt(text)
