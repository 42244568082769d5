"""The candidate's source in a model's completion, found as kagent's agent asks for it: one
complete Python file defining `class ModelNew` (prompts/system.md), written in a fenced code
block (```python ... ```), the way the prompts show code."""
import re

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$",
                    re.DOTALL | re.MULTILINE)
_MODEL_NEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)


def _text(completion):
    """A completion as text: a string, or a chat completion (a list of messages, or one
    message) whose assistant messages' contents are joined, as TRL gives conversational
    completions."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    parts = []
    for message in completion:
        if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
            content = message.get("content")
            if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
                content = "".join(part.get("text", "") for part in content
                                  if isinstance(part, dict))
            if isinstance(content, str):
                parts.append(content)
    return "\n".join(parts)


def extract_source(completion):
    """The candidate's source, or None when the completion holds none.

    The last fenced block that defines `class ModelNew` (a model often drafts, then gives the
    final file last); else, with no such block, the whole completion when it is itself a file
    defining ModelNew (no fences at all). A block tagged with a language other than python
    (or none) still counts when it defines ModelNew."""
    text = _text(completion)
    blocks = [match.group(3) for match in _FENCE.finditer(text)]
    for block in reversed(blocks):
        if _MODEL_NEW.search(block):
            return block.rstrip() + "\n"
    if not blocks and _MODEL_NEW.search(text):
        return text.strip() + "\n"
    return None
