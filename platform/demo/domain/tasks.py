"""The catalogue of the demo coding domain (SPEC 6.1): twelve small functions and five files.

A task is named in prompts by its `words`; the function's name is formed from them by the
naming style (see `style.function_name`). Every `words` is two words, so the naming style of
a catalogue function can always be read back from its name.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    name: str
    hint: str  # the annotation's source text, e.g. "list[int]"


@dataclass(frozen=True)
class Task:
    words: str  # what the prompt says, e.g. "sum list"
    description: str  # the prompt's task line, and the docstring when there is one
    params: tuple[Param, ...]
    returns: str  # the return annotation's source text
    body: str  # the whole body apart from any docstring: one statement


def _task(words: str, description: str, params: str, returns: str, body: str) -> Task:
    """Build a task from the table's notation, params as "name:hint,name:hint"."""
    pairs = (param.split(":") for param in params.split(","))
    return Task(words, description, tuple(Param(name, hint) for name, hint in pairs), returns, body)


TASKS: tuple[Task, ...] = (
    _task("sum list", "Return the sum of the numbers in a list.", "xs:list[int]", "int", "return sum(xs)"),
    _task("max value", "Return the largest number in a list.", "xs:list[int]", "int", "return max(xs)"),
    _task("count items", "Return how many items a list has.", "xs:list", "int", "return len(xs)"),
    _task("reverse text", "Return the text reversed.", "s:str", "str", "return s[::-1]"),
    _task("is even", "Return whether a number is even.", "n:int", "bool", "return n % 2 == 0"),
    _task("square number", "Return the square of a number.", "n:int", "int", "return n * n"),
    _task("join words", "Join words with single spaces.", "words:list[str]", "str", 'return " ".join(words)'),
    _task("first item", "Return the first item of a list.", "xs:list", "object", "return xs[0]"),
    _task("count vowels", "Return the number of vowels in a text.", "s:str", "int",
          'return sum(1 for c in s if c in "aeiou")'),
    _task("add numbers", "Return the sum of two numbers.", "a:int,b:int", "int", "return a + b"),
    _task("to upper", "Return the text in upper case.", "s:str", "str", "return s.upper()"),
    _task("average value", "Return the mean of a list of numbers.", "xs:list[float]", "float",
          "return sum(xs) / len(xs)"),
)

FILES: tuple[str, ...] = ("utils.py", "helpers.py", "core.py", "tools.py", "main.py")

_BY_WORDS = {task.words: task for task in TASKS}


def task_by_words(words: str) -> Task:
    """The catalogue task a prompt names; KeyError when there is none."""
    return _BY_WORDS[words]
