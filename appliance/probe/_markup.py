"""Tool-call markup left in a reply's text, and the vLLM parser that would have read it.

When the served ``--tool-call-parser`` does not match the chat template, the
model's call arrives as text in ``content`` and never runs.  The markup says
which parser the template needs, so the finding can name it.
"""

from __future__ import annotations

import re

__all__ = ["detect_markup"]

# (pattern, the vLLM parser that reads it); first match wins, so the more specific first.
_MARKERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"<function=[\w.-]+>"), "qwen3_coder"),
    (re.compile(r"<arg_key>"), "glm45"),
    (re.compile(r"<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>"), "kimi_k2"),
    (re.compile("<\uff5ctool\u2581calls\u2581begin\uff5c>|<\uff5ctool\u2581call\u2581begin\uff5c>"), "deepseek_v3"),
    (re.compile(r"<\|channel\|>\s*commentary|to=functions\.\w+"), "openai"),
    (re.compile(r"\[TOOL_CALLS\]"), "mistral"),
    (re.compile(r"<\|python_tag\|>"), "llama3_json"),
    (re.compile(r"<tool_call>"), "hermes"),
    (re.compile(r"^\s*\[\w+\(.*\)\]\s*$", re.DOTALL), "pythonic"),
    (re.compile(r'^\s*\{\s*"name"\s*:\s*"[\w.-]+"\s*,\s*"(arguments|parameters)"\s*:', re.DOTALL), "llama3_json"),
)


def detect_markup(text: str) -> tuple[str, str] | None:
    """``(the markup seen, the parser that reads it)``, or None for plain text."""
    for pattern, parser in _MARKERS:
        m = pattern.search(text)
        if m:
            return m.group(0)[:40].strip(), parser
    return None
