"""MkDocs hooks: the command-line reference from the argument parsers and the HTTP reference
from the service's OpenAPI schema, generated at build time (so they cannot drift)."""

from __future__ import annotations

import contextlib
import io
from typing import Any


def _cli_reference() -> str:
    from crowdbudget.cli import all_commands, build_parser

    parts = []
    for name, command in all_commands(build_parser()).items():
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            command.print_help()
        parts.append(f"## crowdbudget {name}\n\n```text\n{buffer.getvalue().rstrip()}\n```\n")
    return "\n".join(parts)


def _http_reference() -> str:
    from crowdbudget.service import create_app

    schema = create_app("sqlite://").openapi()
    rows = ["| method | path | what |", "|---|---|---|"]
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            summary = str(operation.get("summary", "")).replace("|", "\\|")
            rows.append(f"| `{method.upper()}` | `{path}` | {summary} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if "<!-- cli-reference -->" in markdown:
        markdown = markdown.replace("<!-- cli-reference -->", _cli_reference())
    if "<!-- http-reference -->" in markdown:
        markdown = markdown.replace("<!-- http-reference -->", _http_reference())
    return markdown
