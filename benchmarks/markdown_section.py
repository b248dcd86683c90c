"""Replace the text between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` in a Markdown file (the markers are
appended if absent): how every benchmark's ``--write`` puts its table into benchmarks/README.md."""
from pathlib import Path


def write_section(path: str | Path, name: str, text: str) -> None:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    path = Path(path)
    content = path.read_text() if path.exists() else ""
    if begin not in content:
        content += f"\n{begin}\n{end}\n"
    head, rest = content.split(begin, 1)
    path.write_text(f"{head}{begin}\n{text}\n{end}{rest.split(end, 1)[1]}")
