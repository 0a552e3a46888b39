"""Style dimensions of the demo domain's code (SPEC 6.3): writing a function in a style and
reading the style back from code.

Each dimension is independent; `DIMENSIONS` lists them with their values so that corpus
generation, personas and tests can iterate over them without naming them.
"""

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

from demo.domain.tasks import Task
from demo.domain.toolcalls import parse_code

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "naming": ("snake", "camel"),  # sum_list / sumList
    "indent": ("4", "2", "tab"),  # the body's indentation unit
    "docstring": ("yes", "no"),  # the description as the body's first line
    "hints": ("yes", "no"),  # every parameter and the return annotated as in the catalogue
}

INDENT_UNITS: dict[str, str] = {"4": "    ", "2": "  ", "tab": "\t"}

Function = ast.FunctionDef | ast.AsyncFunctionDef

_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
_CAMEL = re.compile(r"[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+")
_LINE_BREAK = re.compile(r"\r\n?|\n")  # the line breaks ast's line numbers count, no others


@dataclass(frozen=True)
class Style:
    """One value per dimension. A style read from code has None where the code does not tell
    (see `read_style`); styles that code is written in are complete."""

    naming: str | None
    indent: str | None
    docstring: str | None
    hints: str | None

    def __post_init__(self) -> None:
        for name, values in DIMENSIONS.items():
            value = getattr(self, name)
            if value is not None and value not in values:
                raise ValueError(f"{name} is one of {values}, not {value!r}")

    @property
    def complete(self) -> bool:
        return all(getattr(self, name) is not None for name in DIMENSIONS)

    def meets(self, preferences: Mapping[str, str]) -> bool:
        """Whether every preferred value is the one read; an unknown value meets nothing."""
        return all(getattr(self, name) == value for name, value in preferences.items())


def function_name(words: str, naming: str) -> str:
    first, *rest = words.split()
    if naming == "snake":
        return "_".join([first, *rest])
    if naming == "camel":
        return first + "".join(word.capitalize() for word in rest)
    raise ValueError(f"naming is one of {DIMENSIONS['naming']}, not {naming!r}")


def render_function(task: Task, style: Style) -> str:
    """The catalogue function of `task` written in `style`, without a trailing newline."""
    if not style.complete:
        raise ValueError(f"code is written in a complete style, not {style}")
    if style.hints == "yes":
        params = ", ".join(f"{param.name}: {param.hint}" for param in task.params)
        signature = f"({params}) -> {task.returns}:"
    else:
        signature = f"({', '.join(param.name for param in task.params)}):"
    body = [f'"""{task.description}"""'] if style.docstring == "yes" else []
    body.append(task.body)
    unit = INDENT_UNITS[style.indent]
    return "\n".join([f"def {function_name(task.words, style.naming)}{signature}", *(unit + line for line in body)])


def read_style(code: str) -> Style:
    """The style of the one top-level function in `code`, told without knowing its task.

    A dimension comes back None when the code does not tell it:
    - naming: a name that is neither snake (`sum_list`) nor camel (`sumList`) case, which
      includes every one-word name (`total`): one word is written alike in both;
    - indent: a body on the `def` line, or a first body line indented other than by exactly
      4 spaces, 2 spaces or one tab;
    - hints: some but not all of the parameters and the return annotated.
    Docstring is always told: any string literal as the body's first statement is one.
    ValueError when `code` does not parse or has no top-level function.
    """
    function = top_level_function(parse_code(code))
    return Style(
        naming=_naming(function.name),
        indent=_indent(code, function),
        docstring="no" if ast.get_docstring(function, clean=False) is None else "yes",
        hints=_hints(function),
    )


def top_level_function(module: ast.Module) -> Function:
    for statement in module.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return statement
    raise ValueError("the code has no top-level function")


def _naming(name: str) -> str | None:
    if _SNAKE.fullmatch(name):
        return "snake"
    if _CAMEL.fullmatch(name):
        return "camel"
    return None


def _indent(code: str, function: Function) -> str | None:
    first = function.body[0]
    if first.lineno == function.lineno:
        return None
    line = _LINE_BREAK.split(code)[first.lineno - 1]
    leading = line[: first.col_offset]
    return next((name for name, unit in INDENT_UNITS.items() if leading == unit), None)


def _hints(function: Function) -> str | None:
    arguments = function.args
    params = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    params += [param for param in (arguments.vararg, arguments.kwarg) if param is not None]
    annotations = [param.annotation for param in params] + [function.returns]
    if all(annotation is not None for annotation in annotations):
        return "yes"
    if all(annotation is None for annotation in annotations):
        return "no"
    return None
