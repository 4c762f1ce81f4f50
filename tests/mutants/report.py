"""The report of ``make mutants``: the score of each mutated module and its surviving
mutants, the known-equivalent ones apart.

Run from the project's root after ``mutmut run``; it reads mutmut's results in
``mutants/`` and the list of equivalent mutants (``tests/mutants/equivalent.txt``),
prints the report as Markdown, writes it to ``mutants/report.md`` too, and exits 1
when a mutant survived that the list does not name (or one was not tested).

A mutant counts as killed when a test failed on it or it timed out. An equivalent
mutant is named in the list by its module, its function and the lines it changes, so
an entry holds however mutmut numbers the mutants of a changed function; an entry
that no surviving mutant matches any more is reported as stale.

``--seconds`` adds how long the run took.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
from mutmut.utils.file_utils import walk_mutatable_files
from mutmut.utils.format_utils import orig_function_and_class_names_from_key

EQUIVALENT = Path(__file__).with_name("equivalent.txt")
REPORT = Path("mutants/report.md")
#: mutmut's statuses that count as killed.
KILLED = {"killed", "timeout"}


@dataclass(frozen=True)
class Entry:
    """Equivalent mutants of the list: where, what each changes, and why that changes nothing."""

    module: str
    function: str
    #: The lines each mutant removes and adds.
    mutants: tuple[tuple[str, ...], ...]
    reason: str


def read_equivalents(path: Path = EQUIVALENT) -> list[Entry]:
    """The entries of ``path``: blocks separated by blank lines, each a line
    ``MODULE FUNCTION`` (``state/table.py KeyedTable.update``); then the lines a mutant
    removes (``-``) and adds (``+``) as mutmut's diff shows them, for one or more
    mutants, a line ``or`` between two; then the reason, on lines of its own. Lines
    starting with ``#`` are comments."""
    text = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#"))
    entries = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        module, function = lines[0].split()
        mutants, reason = [[]], []
        for line in lines[1:]:
            if line == "or":
                mutants.append([])
            elif line[:1] in "-+":
                mutants[-1].append(_normal(line))
            else:
                reason.append(line.strip())
        if not all(mutants) or not reason:
            raise SystemExit(f"{path}: the entry of {module} {function} needs each mutant's lines and a reason")
        entries.append(Entry(module, function, tuple(map(tuple, mutants)), " ".join(reason)))
    return entries


def _normal(line: str) -> str:
    """A diff line without its indentation: ``-`` or ``+``, then the code."""
    return line[0] + " ".join(line[1:].split())


def changed_lines(diff: str) -> tuple[str, ...]:
    """The lines a mutant removes and adds, from its unified diff."""
    return tuple(_normal(line) for line in diff.splitlines()
                 if line[:1] in "-+" and not line.startswith(("---", "+++")))


def function_of(mutant: str) -> str:
    """``Class.method`` or ``function`` of a mutant's name (``state.table.xǁKeyedTableǁupdate__mutmut_3``)."""
    function, cls = orig_function_and_class_names_from_key(mutant)
    return f"{cls}.{function}" if cls else function


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, help="how long mutmut ran")
    args = parser.parse_args(argv)
    equivalents = read_equivalents()
    used: set[tuple[Entry, tuple[str, ...]]] = set()
    scores, survivors, equivalent, unchecked = [], [], [], []
    for path in sorted(walk_mutatable_files()):
        data = SourceFileMutationData(path=path)
        data.load()
        statuses = Counter()
        for mutant, exit_code in data.exit_code_by_key.items():
            status = status_by_exit_code[exit_code]
            if status in KILLED:
                statuses["killed"] += 1
                continue
            if status != "survived":
                statuses["other"] += 1
                unchecked.append(f"`{mutant}`: {status}")
                continue
            diff = get_diff_for_mutant(mutant, path=path)
            where, changes = (str(path), function_of(mutant)), changed_lines(diff)
            entry = next((e for e in equivalents if (e.module, e.function) == where and changes in e.mutants), None)
            if entry:
                used.add((entry, changes))
                statuses["equivalent"] += 1
                equivalent.append(f"`{mutant}`: {entry.reason}")
            else:
                statuses["survived"] += 1
                survivors.append(f"`{mutant}` (`{where[0]} {where[1]}`)\n\n```diff\n{diff}\n```")
        total = sum(statuses.values())
        scores.append(f"| `{path}` | {statuses['killed']}/{total} | {statuses['equivalent']} | "
                      f"{statuses['survived']} | {statuses['other']} |")
    stale = [f"{e.module} {e.function}: {' / '.join(changes)}" for e in equivalents for changes in e.mutants
             if (e, changes) not in used]
    lines = ["# Mutants", ""]
    if args.seconds is not None:
        lines += [f"mutmut ran {args.seconds / 60:.0f} minutes.", ""]
    lines += ["| module | killed/total | equivalent | survived | not tested |", "|---|---|---|---|---|", *scores]
    for title, items in (("Survived", survivors), ("Not tested", unchecked),
                         ("Equivalent (tests/mutants/equivalent.txt)", equivalent),
                         ("Stale entries of tests/mutants/equivalent.txt", stale)):
        if items:
            lines += ["", f"## {title}", "", *(f"- {item}" for item in items)]
    report = "\n".join(lines) + "\n"
    REPORT.write_text(report)
    print(report)
    return 1 if survivors or unchecked else 0


if __name__ == "__main__":
    sys.exit(main())
