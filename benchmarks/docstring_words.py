"""The median word count of sylvie/'s module docstrings, and the modules over a bound (80 words by default).

    python benchmarks/docstring_words.py [--over 80] [--all]

A module without a docstring counts as 0 words. ARCHITECTURE.md's conventions ask docstrings to say what and why,
briefly; this script is how the count is quoted.
"""
from __future__ import annotations

import argparse
import ast
import statistics
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "sylvie"


def counts(package: Path = PACKAGE) -> dict[str, int]:
    """Each module's docstring word count (whitespace-separated), by its path under the repository."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
        out[str(path.relative_to(package.parent))] = len(doc.split())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--over", type=int, default=80, help="list the modules whose docstring has more words")
    ap.add_argument("--all", action="store_true", help="list every module's count")
    args = ap.parse_args()
    words = counts()
    print(f"{len(words)} modules; median module docstring: {statistics.median(words.values()):g} words")
    over = {p: n for p, n in words.items() if args.all or n > args.over}
    if over:
        print("" if args.all else f"over {args.over} words:")
        for path, n in sorted(over.items(), key=lambda kv: -kv[1]):
            print(f"  {n:4d}  {path}")


if __name__ == "__main__":
    main()
