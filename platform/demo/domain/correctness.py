"""Whether an edit does what its prompt asked (SPEC 6.5), judged on the code's AST and never
by running it: model output is untrusted text."""

import ast
from dataclasses import dataclass

from demo.domain.prompts import Prompt
from demo.domain.style import DIMENSIONS, Function, Style, function_name, read_style, top_level_function
from demo.domain.tasks import Task
from demo.domain.toolcalls import Edit, parse_code


@dataclass(frozen=True)
class Verdict:
    right_file: bool  # the prompt's file; never right when the prompt did not name one
    right_function: bool  # named from the task's words, in either naming style
    correct_body: bool  # the catalogue's definition, apart from name, docstring and style
    style: Style  # as `read_style` tells it

    @property
    def correct(self) -> bool:
        return self.right_file and self.right_function and self.correct_body


def check_edit(edit: Edit, prompt: Prompt) -> Verdict:
    """Judge an edit from `parse_response` against the prompt it answers."""
    function = top_level_function(parse_code(edit.code))
    return Verdict(
        right_file=edit.file == prompt.file,
        right_function=function.name in {function_name(prompt.task.words, naming) for naming in DIMENSIONS["naming"]},
        correct_body=_does_the_task(function, prompt.task),
        style=read_style(edit.code),
    )


def _does_the_task(function: Function, task: Task) -> bool:
    """A plain undecorated `def` with the catalogue's parameters (same names and order; no
    defaults, `*`, `/` or `**`), every annotation given equal to the catalogue's, and the
    catalogue's body once a leading docstring is dropped. Trees are compared by `ast.dump`,
    which leaves out positions, so spacing, quotes and redundant parentheses do not matter."""
    arguments = function.args
    if not isinstance(function, ast.FunctionDef) or function.decorator_list:
        return False
    if arguments.posonlyargs or arguments.vararg or arguments.kwonlyargs or arguments.kwarg or arguments.defaults:
        return False
    if [param.arg for param in arguments.args] != [param.name for param in task.params]:
        return False
    annotations = [(param.annotation, expected.hint) for param, expected in zip(arguments.args, task.params)]
    annotations.append((function.returns, task.returns))
    if any(given is not None and _dump(given) != _dump(_expression(hint)) for given, hint in annotations):
        return False
    expected_body = parse_code(task.body).body
    return [_dump(node) for node in _without_docstring(function.body)] == [_dump(node) for node in expected_body]


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    return body[1:] if docstring and isinstance(first.value.value, str) else body


def _expression(source: str) -> ast.expr:
    return parse_code(source, mode="eval").body


def _dump(node: ast.AST) -> str:
    return ast.dump(node)  # leaves out line and column numbers
