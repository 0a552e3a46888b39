"""The demo coding domain (SPEC 6.1-6.3): a catalogue of tasks, the prompt and tool-call
grammars, code styles, a correctness checker and a random generator. Standard library only,
exact, and fast enough to judge thousands of responses a second.

    import random
    from demo.domain import Edit, check_edit, generate, parse_response, render_prompt

    rng = random.Random(0)
    prompt = generate.sample_prompt(rng, ambiguous_rate=0.2)  # Prompt(task, file or None)
    sampled = generate.sample_labelled_response(rng, prompt)  # Sampled(text, kind, style, file)
    user_message, assistant_message = render_prompt(prompt), sampled.text

    response = parse_response(assistant_message)  # Edit(file, code) | Ask(text) | Invalid(reason, message)
    if isinstance(response, Edit):
        verdict = check_edit(response, prompt)  # right_file, right_function, correct_body, style

Modules: `tasks` (TASKS, FILES), `prompts` (Prompt, render_prompt, parse_prompt), `style`
(Style, DIMENSIONS, render_function, read_style), `toolcalls` (parse_response, render_edit,
render_ask), `correctness` (check_edit, Verdict), `generate` (the base corpus's policy).
"""

from demo.domain.correctness import Verdict, check_edit
from demo.domain.prompts import Prompt, parse_prompt, render_prompt
from demo.domain.style import DIMENSIONS, Style, function_name, read_style, render_function
from demo.domain.tasks import FILES, TASKS, Param, Task, task_by_words
from demo.domain.toolcalls import Ask, Edit, Invalid, Reason, Response, parse_response, render_ask, render_edit

__all__ = [
    "DIMENSIONS", "FILES", "TASKS",
    "Ask", "Edit", "Invalid", "Param", "Prompt", "Reason", "Response", "Style", "Task", "Verdict",
    "check_edit", "function_name", "parse_prompt", "parse_response", "read_style", "render_ask",
    "render_edit", "render_function", "render_prompt", "task_by_words",
]
