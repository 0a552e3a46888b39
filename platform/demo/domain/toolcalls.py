"""The assistant message of the demo domain (SPEC 6.3): exactly one tool call.

    <edit file="utils.py">
    def sum_list(xs: list[int]) -> int:
        return sum(xs)
    </edit>

or `<ask>which file?</ask>`. The grammar, exactly:
- whitespace around the tool call is forgiven (generation ends with newlines or not); any other
  text before or after it makes the response invalid;
- an edit opens with exactly `<edit file="NAME">` (one space, double quotes, no other
  attribute) with a NAME that is not blank, and closes at the first `</edit>`; its code is
  what lies between, less the line breaks right after the opening and before the closing tag;
- the code parses with `ast.parse` and is exactly one top-level function definition and
  nothing else (comments and blank lines are no statements; a module docstring is one);
- an ask opens with exactly `<ask>`, closes at the first `</ask>`, and holds one line of text
  (whitespace around it forgiven); its text is that line without the whitespace.
Everything else is `Invalid`, with a `Reason` code a program can count and a message a person
can read. A well-formed edit to the wrong file or of the wrong function is valid (and wrong:
that is `correctness`'s business).
"""

import ast
import re
import threading
import warnings
from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    NO_TOOL_CALL = "no_tool_call"
    TEXT_OUTSIDE = "text_outside"
    UNKNOWN_TAG = "unknown_tag"
    MALFORMED_TAG = "malformed_tag"
    UNCLOSED_TAG = "unclosed_tag"
    MULTIPLE_CALLS = "multiple_calls"
    MISSING_FILE = "missing_file"
    EMPTY_FILE = "empty_file"
    EMPTY_ASK = "empty_ask"
    MULTILINE_ASK = "multiline_ask"
    SYNTAX_ERROR = "syntax_error"
    NOT_ONE_FUNCTION = "not_one_function"
    EXTRA_STATEMENT = "extra_statement"


_MESSAGES: dict[Reason, str] = {
    Reason.NO_TOOL_CALL: "the response is not a tool call",
    Reason.TEXT_OUTSIDE: "there is text outside the tool call",
    Reason.UNKNOWN_TAG: "the tool call is neither <edit> nor <ask>",
    Reason.MALFORMED_TAG: 'the opening tag is not exactly <edit file="NAME"> or <ask>',
    Reason.UNCLOSED_TAG: "the tool call's tag is never closed",
    Reason.MULTIPLE_CALLS: "the response holds more than one tool call",
    Reason.MISSING_FILE: "the edit names no file",
    Reason.EMPTY_FILE: "the edit's file name is blank",
    Reason.EMPTY_ASK: "the question is blank",
    Reason.MULTILINE_ASK: "the question is more than one line",
    Reason.SYNTAX_ERROR: "the code does not parse",
    Reason.NOT_ONE_FUNCTION: "the code does not define exactly one top-level function",
    Reason.EXTRA_STATEMENT: "the code has statements besides its function",
}


@dataclass(frozen=True)
class Edit:
    file: str
    code: str


@dataclass(frozen=True)
class Ask:
    text: str


@dataclass(frozen=True)
class Invalid:
    reason: Reason
    message: str


Response = Edit | Ask | Invalid

_OPENING = re.compile(r"<([A-Za-z][\w-]*)([^<>]*)>")
_TOOL_OPENING = re.compile(r"<(?:edit|ask)\b")
_FILE_ATTRIBUTE = re.compile(r' file="([^"\r\n]*)"')


def parse_response(text: str) -> Response:
    response = text.strip()
    opening = _OPENING.match(response)
    if opening is None:
        return _invalid(Reason.TEXT_OUTSIDE if _TOOL_OPENING.search(response) else Reason.NO_TOOL_CALL)
    tag, attributes = opening.groups()
    if tag not in ("edit", "ask"):
        return _invalid(Reason.UNKNOWN_TAG, f"<{tag}>")
    closing = f"</{tag}>"
    end = response.find(closing, opening.end())
    if end < 0:
        return _invalid(Reason.UNCLOSED_TAG, f"no {closing}")
    if after := response[end + len(closing):]:
        return _invalid(Reason.MULTIPLE_CALLS if _TOOL_OPENING.search(after) else Reason.TEXT_OUTSIDE)
    content = response[opening.end():end]
    return _edit(attributes, content) if tag == "edit" else _ask(attributes, content)


# CPython 3.11's ast.parse is not safe across threads ("AST constructor recursion depth
# mismatch", seen in CI under the demo's traffic threads), nor is catch_warnings.
_PARSING = threading.Lock()


def parse_code(code: str, mode: str = "exec") -> ast.AST:
    """`ast.parse` one thread at a time, without its warnings (invalid escapes, ...): in
    untrusted code they are no one's to read, and a `-W error` run must not turn them into crashes."""
    with _PARSING, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(code, mode=mode)


def render_edit(file: str, code: str) -> str:
    """The canonical edit response; ValueError for a file or code the grammar cannot carry."""
    if not file.strip() or _FILE_ATTRIBUTE.fullmatch(f' file="{file}"') is None:
        raise ValueError(f"{file!r} cannot be an edit's file name")
    if "</edit>" in code:
        raise ValueError("code holding </edit> would close the edit early")
    return f'<edit file="{file}">\n{code}\n</edit>'


def render_ask(text: str) -> str:
    """The canonical ask response; ValueError unless `text` is one non-blank line."""
    if not text.strip() or "\n" in text or "\r" in text or "</ask>" in text:
        raise ValueError(f"{text!r} is not one line of question")
    return f"<ask>{text}</ask>"


def _edit(attributes: str, content: str) -> Edit | Invalid:
    file_attribute = _FILE_ATTRIBUTE.fullmatch(attributes)
    if file_attribute is None:
        return _invalid(Reason.MISSING_FILE if "file=" not in attributes else Reason.MALFORMED_TAG)
    file = file_attribute.group(1)
    if not file.strip():
        return _invalid(Reason.EMPTY_FILE)
    code = content.strip("\r\n")
    try:
        module = parse_code(code)
    except (SyntaxError, ValueError, RecursionError) as error:  # ValueError: a null byte
        return _invalid(Reason.SYNTAX_ERROR, str(error))
    functions = [node for node in module.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(functions) != 1:
        return _invalid(Reason.NOT_ONE_FUNCTION, f"it defines {len(functions)}")
    if len(module.body) != 1:
        return _invalid(Reason.EXTRA_STATEMENT)
    return Edit(file, code)


def _ask(attributes: str, content: str) -> Ask | Invalid:
    if attributes:
        return _invalid(Reason.MALFORMED_TAG)
    question = content.strip()
    if not question:
        return _invalid(Reason.EMPTY_ASK)
    if "\n" in question or "\r" in question:
        return _invalid(Reason.MULTILINE_ASK)
    return Ask(question)


def _invalid(reason: Reason, detail: str = "") -> Invalid:
    return Invalid(reason, f"{_MESSAGES[reason]}: {detail}" if detail else _MESSAGES[reason])
