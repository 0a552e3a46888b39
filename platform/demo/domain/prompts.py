"""The user message of the demo domain (SPEC 6.2): three lines naming a task and a file.

    Task: Return the sum of the numbers in a list.
    Function: sum list
    File: utils.py

A prompt whose file is `?` is ambiguous: the right response is to ask which file.
"""

from dataclasses import dataclass

from demo.domain.tasks import FILES, Task, task_by_words

UNKNOWN_FILE = "?"


@dataclass(frozen=True)
class Prompt:
    task: Task
    file: str | None  # None: ambiguous, rendered "File: ?"

    def __post_init__(self) -> None:
        if self.file is not None and self.file not in FILES:
            raise ValueError(f"unknown file {self.file!r}; the demo files are {', '.join(FILES)}")

    @property
    def ambiguous(self) -> bool:
        return self.file is None


def render_prompt(prompt: Prompt) -> str:
    return (
        f"Task: {prompt.task.description}\n"
        f"Function: {prompt.task.words}\n"
        f"File: {prompt.file or UNKNOWN_FILE}"
    )


def parse_prompt(text: str) -> Prompt:
    """The prompt `render_prompt` wrote, or ValueError saying why the text is not one.

    Only whitespace around the three lines is forgiven (chat templates add newlines);
    the labels, the task's words and its description must be exactly the catalogue's.
    """
    lines = text.strip().split("\n")
    if len(lines) != 3:
        raise ValueError(f"a prompt has 3 lines, this one has {len(lines)}")
    description, words, file = (
        _value(line, label) for line, label in zip(lines, ("Task", "Function", "File"))
    )
    try:
        task = task_by_words(words)
    except KeyError:
        raise ValueError(f"no catalogue function is called {words!r}") from None
    if description != task.description:
        raise ValueError(f"{words!r} is described as {task.description!r}, not {description!r}")
    return Prompt(task, None if file == UNKNOWN_FILE else file)


def _value(line: str, label: str) -> str:
    prefix = f"{label}: "
    if not line.startswith(prefix):
        raise ValueError(f"expected a line starting with {prefix!r}, got {line!r}")
    return line.removeprefix(prefix)
