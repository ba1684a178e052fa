#!/usr/bin/env python3
"""Generate pgtail's man pages from the click command tree.

Usage: ``python man/generate.py`` (writes man/*.1) or ``python man/generate.py --check``
(exit 1 when a page on disk differs from what the CLI would generate now).

Synopsis, commands and options come from the click tree, so they cannot drift from the
CLI; DESCRIPTION, EXAMPLES, EXIT STATUS, ENVIRONMENT and the JSON line schema are
hand-written in ``man/content.py`` (a small text markup, converted to roff here).
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import click
from click.formatting import join_options

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
# the pages describe this checkout's CLI: its pgtail comes first, whether or not (and
# wherever) pgtail is installed
if (HERE.parent / "pgtail" / "__init__.py").is_file():
    sys.path.insert(0, str(HERE.parent))

import content  # noqa: E402  (man/content.py, next to this file)

# page name -> top-level commands documented in full on that page
PAGES: dict[str, tuple[str, ...]] = {
    "stream": ("stream",),
    "slot": ("slot",),
    "publication": ("publication",),
    "doctor": ("doctor",),
    "identity": ("identity",),
    "spark": ("spark",),
    "demo": ("demo",),
    "top": ("top",),
}


# --------------------------------------------------------------------------- roff helpers


def escape(text: str) -> str:
    """Escape text for roff: backslashes, hyphens (so options copy-paste), leading dots."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = text.replace("\u2014", "\\(em").replace("\u2192", "\\(->").replace("\u2026", "...")
    return text


def _line(text: str) -> str:
    """One input line: a leading dot or quote would be read as a request."""
    return "\\&" + text if text.startswith((".", "'")) else text


def verbatim(lines: Iterable[str]) -> list[str]:
    """An indented no-fill block (examples, schemas)."""
    out = [".RS 4", ".nf"]
    out += [_line(escape(line)) if line.strip() else "" for line in lines]
    out += [".fi", ".RE"]
    return [line if line else ".sp" for line in out]


_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*")


def inline(text: str) -> str:
    """`code` -> bold, **word** -> bold; everything else escaped."""
    out: list[str] = []
    pos = 0
    for match in _INLINE.finditer(text):
        out.append(escape(text[pos : match.start()]))
        out.append("\\fB" + escape(match.group(1) or match.group(2)) + "\\fR")
        pos = match.end()
    out.append(escape(text[pos:]))
    return "".join(out)


def markup(text: str) -> list[str]:
    """Convert content.py's markup to roff.

    Blocks are separated by blank lines. A block whose lines are indented by four spaces is
    verbatim. ``* item`` lines are bullets. ``term :: text`` lines are a definition list.
    Anything else is a filled paragraph; `code` and **bold** are set in bold.
    """
    out: list[str] = []
    for block in _blocks(text):
        if all(line.startswith("    ") or not line.strip() for line in block):
            out += verbatim(line[4:] for line in block)
        elif block[0].startswith("* "):
            for item in _items(block, "* "):
                out += [".IP \\(bu 2", _line(inline(item))]
            out.append(".PP")
        elif " :: " in block[0]:
            for item in _items(block, None):
                term, _, desc = item.partition(" :: ")
                out += [".TP", _line(inline(term.strip())), _line(inline(desc.strip()))]
            out.append(".PP")
        else:
            out += [".PP", _line(inline(" ".join(line.strip() for line in block)))]
    return out


def _blocks(text: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in text.strip("\n").splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
            current = []
        else:
            current.append(line.rstrip())
    if current:
        blocks.append(current)
    return blocks


def _items(block: list[str], bullet: str | None) -> list[str]:
    """Join continuation lines (indented, no marker) onto their item."""
    items: list[str] = []
    for line in block:
        starts = line.startswith(bullet) if bullet else " :: " in line and not line[0].isspace()
        if starts or not items:
            items.append(line[len(bullet) :] if bullet and starts else line)
        else:
            items[-1] += " " + line.strip()
    return items


def click_help(text: str | None) -> list[str]:
    """Convert a click help text (paragraphs, ``\\b`` no-rewrap blocks) to roff."""
    if not text:
        return []
    out: list[str] = []
    for para in re.split(r"\n\s*\n", inspect.cleandoc(text)):
        lines = para.splitlines()
        if lines and lines[0].strip() == "\b":
            body = lines[1:]
            heading = [ln for ln in body if not ln.startswith(" ")]
            rest = [ln for ln in body if ln.startswith(" ")]
            if heading and len(heading) == 1 and body[0] == heading[0]:
                out += [".PP", _line(inline(heading[0].strip()))]
                body = rest
            indent = min((len(ln) - len(ln.lstrip()) for ln in body if ln.strip()), default=0)
            out += verbatim(ln[indent:] for ln in body)
        else:
            out += [".PP", _line(escape(" ".join(ln.strip() for ln in lines)))]
    return out


# --------------------------------------------------------------------------- click tree


def _context(
    command: click.Command, path: list[str], parent: click.Context | None
) -> click.Context:
    # the command's own context_settings (e.g. ``-h`` as a help option), as click's
    # main() would apply them: the page must not depend on whether main() ran before
    return click.Context(command, info_name=path[-1], parent=parent, **command.context_settings)


def synopsis(command: click.Command, path: list[str], ctx: click.Context) -> str:
    pieces = command.collect_usage_pieces(ctx)
    return " ".join(path + pieces)


def options(command: click.Command, ctx: click.Context) -> list[str]:
    out: list[str] = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.hidden:
            continue
        if ctx.parent is not None and param is command.get_help_option(ctx):
            continue  # every command has --help; the main page says so once
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, help_text = record
        # click writes the option names the way join_options orders them (short first)
        flags = join_options(param.opts)[0]
        metavar = names[len(flags) :].strip() if names.startswith(flags) else ""
        if param.secondary_opts:
            flags += " / " + join_options(param.secondary_opts)[0]
            metavar = ""
        term = "\\fB" + escape(flags).replace(", ", "\\fR, \\fB").replace(" / ", "\\fR / \\fB")
        term += "\\fR"
        if metavar:
            term += " \\fI" + escape(metavar) + "\\fR"
        out += [".TP", _line(term), _line(escape(" ".join(help_text.split())))]
    return out


def arguments(command: click.Command) -> str:
    names = [p.human_readable_name for p in command.params if isinstance(p, click.Argument)]
    return ", ".join(names)


def command_section(
    command: click.Command, path: list[str], parent: click.Context | None, level: str
) -> list[str]:
    """SYNOPSIS, help and options of one command; subcommands recursively as .SS sections."""
    ctx = _context(command, path, parent)
    out: list[str] = []
    if level == "SS":
        out += [f".SS {escape(' '.join(path))}"]
    out += [
        ".PP",
        "\\fB"
        + escape(" ".join(path))
        + "\\fR "
        + escape(" ".join(command.collect_usage_pieces(ctx))),
    ]
    out += click_help(command.help)
    opts = options(command, ctx)
    if opts:
        out += [".PP", "Options:", ".RS 4"] + opts + [".RE"]
    if isinstance(command, click.Group):
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            out += command_section(sub, [*path, name], ctx, "SS")
    return out


def all_commands(root: click.Group) -> list[tuple[list[str], click.Command]]:
    """Every command in the tree as (path, command), depth first, sorted by name."""
    found: list[tuple[list[str], click.Command]] = []

    def walk(group: click.Group, path: list[str], parent: click.Context | None) -> None:
        ctx = _context(group, path, parent)
        for name in sorted(group.list_commands(ctx)):
            sub = group.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            found.append(([*path, name], sub))
            if isinstance(sub, click.Group):
                walk(sub, [*path, name], ctx)

    walk(root, ["pgtail"], None)
    return found


# --------------------------------------------------------------------------- pages


def _header(page: str, summary: str, version: str) -> list[str]:
    title = "PGTAIL" if page == "pgtail" else "PGTAIL\\-" + escape(page.upper())
    name = "pgtail" if page == "pgtail" else "pgtail\\-" + escape(page)
    return [
        f'.\\" Generated by man/generate.py from the pgtail {version} command tree and',
        '.\\" man/content.py. Do not edit; run: python man/generate.py',
        f'.TH {title} 1 "" "pgtail {escape(version)}" "pgtail manual"',
        ".nh",
        ".ad l",
        ".SH NAME",
        f"{name} \\- {escape(summary)}",
    ]


def _hand_sections(page: str, version: str) -> dict[str, list[str]]:
    sections = content.PAGES.get(page, {})
    return {title: markup(text) for title, text in sections.items()}


def _see_also(page: str) -> list[str]:
    names = ["pgtail"] + [f"pgtail-{p}" for p in PAGES]
    refs = [
        f"\\fB{escape(n)}\\fR(1)"
        for n in names
        if n != ("pgtail" if page == "pgtail" else f"pgtail-{page}")
    ]
    refs += ["\\fBpg_recvlogical\\fR(1)", "\\fBjq\\fR(1)"]
    return [".SH SEE ALSO", ",\n".join(refs)]


def _common_tail(page: str, hand: dict[str, list[str]]) -> list[str]:
    out: list[str] = []
    for title in content.ORDER_AFTER:
        body = hand.pop(title, None)
        if body is None and title in content.COMMON:
            body = markup(content.COMMON[title])
        if body:
            out += [f".SH {title}"] + body
    for title, body in hand.items():  # any further hand-written section
        out += [f".SH {title}"] + body
    return out


def page_for(root: click.Group, page: str, version: str) -> str:
    ctx = _context(root, ["pgtail"], None)
    names = PAGES[page]
    commands = [(n, root.get_command(ctx, n)) for n in names]
    present = [(n, c) for n, c in commands if c is not None]
    first = present[0][1] if present else None
    summary = content.SUMMARIES.get(page) or (first.get_short_help_str(200) if first else page)
    hand = _hand_sections(page, version)
    out = _header(page, summary, version)
    out += [".SH SYNOPSIS"]
    if present:
        for name, command in present:
            sub_ctx = _context(command, ["pgtail", name], ctx)
            out += [
                ".PP",
                "\\fBpgtail "
                + escape(name)
                + "\\fR "
                + escape(" ".join(command.collect_usage_pieces(sub_ctx))),
            ]
    else:
        out += [".PP", f"\\fBpgtail {escape(page)}\\fR ..."]
    out += [".SH DESCRIPTION"] + hand.pop("DESCRIPTION", [])
    if len(present) == 1 and not isinstance(first, click.Group):
        name, command = present[0]
        sub_ctx = _context(command, ["pgtail", name], ctx)
        out += click_help(command.help)
        out += [".SH OPTIONS"] + options(command, sub_ctx)
    elif present:
        out += [".SH COMMANDS"]
        for name, command in present:
            out += command_section(command, ["pgtail", name], ctx, "SS")
    else:
        out += [".SH USAGE", ".PP", "This command is not part of this build of pgtail."]
    out += _common_tail(page, hand)
    out += _see_also(page)
    return "\n".join(out) + "\n"


def main_page(root: click.Group, version: str) -> str:
    ctx = _context(root, ["pgtail"], None)
    hand = _hand_sections("pgtail", version)
    out = _header("pgtail", content.SUMMARIES["pgtail"], version)
    out += [
        ".SH SYNOPSIS",
        ".PP",
        "\\fBpgtail\\fR [\\fB\\-\\-debug\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".PP",
        "\\fBpgtail \\-\\-version\\fR | \\fB\\-\\-help\\fR",
    ]
    out += [".SH DESCRIPTION"] + hand.pop("DESCRIPTION", [])
    opts = options(root, ctx)
    out += [".SH GLOBAL OPTIONS", ".RS 0"] + opts + [".RE"]
    out += [".SH COMMANDS"]
    paged = {name: page for page, names in PAGES.items() for name in names}
    leftovers: list[tuple[str, click.Command]] = []
    for name in sorted(root.list_commands(ctx)):
        command = root.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        where = paged.get(name)
        ref = f" See \\fBpgtail\\-{escape(where)}\\fR(1)." if where else ""
        out += [
            ".TP",
            f"\\fBpgtail {escape(name)}\\fR",
            escape(command.get_short_help_str(200)) + ref,
        ]
        if isinstance(command, click.Group):
            sub_ctx = _context(command, ["pgtail", name], ctx)
            subs = [
                s
                for s in sorted(command.list_commands(sub_ctx))
                if (c := command.get_command(sub_ctx, s)) is not None and not c.hidden
            ]
            if subs:
                out += [
                    ".br",
                    "Subcommands: " + ", ".join(f"\\fB{escape(s)}\\fR" for s in subs) + ".",
                ]
        if where is None:
            leftovers.append((name, command))
    for name, command in leftovers:
        out += command_section(command, ["pgtail", name], ctx, "SS")
    out += _common_tail("pgtail", hand)
    out += _see_also("pgtail")
    return "\n".join(out) + "\n"


def build_pages(root: click.Group | None = None) -> dict[str, str]:
    """Every man page as {file name: roff text}, generated from the CLI as it is now."""
    from pgtail import __version__
    from pgtail.cli import _register_commands, cli

    if root is None:
        _register_commands()
        root = cli
    pages = {"pgtail.1": main_page(root, __version__)}
    for page in PAGES:
        pages[f"pgtail-{page}.1"] = page_for(root, page, __version__)
    return pages


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    pages = build_pages()
    stale = []
    for name, text in pages.items():
        path = HERE / name
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if check:
        if stale:
            print(
                "stale man pages: " + ", ".join(stale) + " (run: python man/generate.py)",
                file=sys.stderr,
            )
            return 1
        return 0
    print(f"wrote {len(pages)} pages to {HERE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
