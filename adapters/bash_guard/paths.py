"""Which arguments a command writes, deletes or changes: each must lie inside the worktree.

Covered: ``rm``, ``rmdir``, ``unlink``, ``shred``, ``touch``, ``mkdir``, ``mkfifo``, ``tee``,
``truncate``, ``mv``, ``ln`` (all operands: a symlink's target too, or the next command
could write through it), ``cp``/``install`` (the destination), ``chmod``/``chown``/``chgrp``,
``dd of=``, ``sed -i``/``perl -i``/``ruby -i``, ``sort -o``, ``uniq``'s output, ``patch``,
``tar`` (archive written, ``-C``; ``-P`` and program-running options denied), ``unzip -d``,
``mktemp``, ``make -C``, ``find`` (``-delete`` and ``-exec`` under its roots, ``-fprint``),
``rsync`` (remote hosts denied, the destination checked). Reads are not restricted here;
credential files are, for every command, by the guard.
"""

from __future__ import annotations

import re

from adapters.bash_guard.checks import STDIN_WORD, Checks, Rule, scan, words
from adapters.bash_guard.words import Word

__all__ = ["PATH_RULES"]


def _operands(takes_value: str = "", *, which: str = "all", all_when: str = "") -> Rule:
    """Writes ``all`` operands, the ``last`` one, or all but the first (``chown OWNER f``),
    but all of them with an ``all_when`` option; ``-t DIR`` names the destination."""
    takes = words(takes_value) | words("-t --target-directory")

    def rule(checks: Checks, name: str, args: list[Word]) -> None:
        options = scan(args, takes)
        targets = options.values("-t", "--target-directory")
        for target in targets:
            checks.write(target, f"{name} target directory")
        written = options.args
        if options.has(*all_when.split()):
            written = options.args
        elif which == "last":
            written = [] if targets else options.args[-1:]
        elif which == "skip_first":
            written = options.args[1:]
        for word in written:
            checks.write(word, name)

    return rule


_CHMOD_MODE = re.compile(
    r"(?:[ugoa]*(?:[-+=](?:[rwxXst]*|[ugo]))+|[-+=]?[0-7]{1,4})"
    r"(?:,[ugoa]*(?:[-+=](?:[rwxXst]*|[ugo]))+)*"
)


def _chmod(checks: Checks, name: str, args: list[Word]) -> None:
    # "-w" is a mode to chmod, not an option, so modes are set aside before options
    rest = [w for w in args if not _CHMOD_MODE.fullmatch(w.value or "")]
    for word in scan(rest).args:
        checks.write(word, name)


def _dd(checks: Checks, name: str, args: list[Word]) -> None:
    for word in args:
        value = word.value
        if word.skeleton.startswith("of="):
            checks.write(Word.literal(value[3:]) if value is not None else word, "dd of=")


def _in_place(checks: Checks, name: str, args: list[Word]) -> None:
    """``sed -i`` and ``perl -i`` rewrite the files they are given."""
    takes = words("-e --expression -f --file -l --line-length") if name == "sed" else words("-e -E")
    options = scan(args, takes)
    if not options.has("-i", "--in-place"):
        return
    written = options.args
    if name == "sed" and not options.has("-e", "--expression", "-f", "--file"):
        written = written[1:]  # the first operand is the script
    for word in written:
        checks.write(word, f"{name} -i")


def _sort(checks: Checks, name: str, args: list[Word]) -> None:
    takes = words("-o --output -k --key -t --field-separator -S --buffer-size -T -f -s -w")
    options = scan(args, takes | words("--temporary-directory --files0-from --parallel"))
    for output in options.values("-o", "--output", "-T", "--temporary-directory"):
        checks.write(output, f"{name} output")
    if name == "uniq":
        for output in options.args[1:2]:
            checks.write(output, "uniq output")


def _patch(checks: Checks, name: str, args: list[Word]) -> None:
    takes = words("-o --output -d --directory -i --input -p --strip -r --reject-file -B --prefix")
    options = scan(args, takes | words("-z --suffix -V -D --ifdef -F --fuzz -Y"))
    for output in options.values("-o", "--output", "-d", "--directory", "-r", "--reject-file"):
        checks.write(output, f"{name} output")
    for word in options.args[:1]:
        checks.write(word, name)


_TAR_TAKES_VALUE = "fCTXbgKNLVH"
_TAR_RUNS = (
    "-I",
    "--use-compress-program",
    "--to-command",
    "-F",
    "--info-script",
    "--checkpoint-action",
    "--new-volume-script",
)


def _tar(checks: Checks, name: str, args: list[Word]) -> None:
    spelled = list(args)
    first = spelled[0].value if spelled else None
    if first and re.fullmatch(r"[A-Za-z]+", first):  # "tar xzf a.tgz": values follow in order
        rest = spelled[1:]
        spelled = [Word.literal("-" + c) for c in first if c not in _TAR_TAKES_VALUE]
        for c in (c for c in first if c in _TAR_TAKES_VALUE):
            spelled += [Word.literal("-" + c), *rest[:1]]
            rest = rest[1:]
        spelled += rest
    takes = words("-f --file -C --directory -T --files-from -X --exclude-from -b -g -K -N -L -V")
    options = scan(spelled, takes | words("-H --format"))
    if options.has("-P", "--absolute-names"):
        checks.deny("tar -P writes members with absolute paths, outside the worktree")
    if options.has(*_TAR_RUNS):
        checks.deny("this tar option runs another program")
    if options.has("-c", "--create", "-r", "--append", "-u", "--update", "-A", "--delete"):
        for archive in options.values("-f", "--file"):
            if archive.value != "-":
                checks.write(archive, "tar archive")
    for directory in options.values("-C", "--directory"):
        checks.write(directory, "tar -C directory")


def _unzip(checks: Checks, name: str, args: list[Word]) -> None:
    for k, word in enumerate(args):  # unzip takes options anywhere, after the archive too
        value = word.value or ""
        if value == "-d" and k + 1 < len(args):
            checks.write(args[k + 1], "unzip -d")
        elif value.startswith("-d") and len(value) > 2:
            checks.write(Word.literal(value[2:]), "unzip -d")


def _mktemp(checks: Checks, name: str, args: list[Word]) -> None:
    options = scan(args, words("-p --suffix"))
    for directory in options.values("-p", "--tmpdir"):
        checks.write(directory, "mktemp directory")
    if not options.has("-t", "-p", "--tmpdir"):  # a bare template is relative to the cwd
        for template in options.args:
            checks.write(template, "mktemp template")


def _make(checks: Checks, name: str, args: list[Word]) -> None:
    takes = words("-C --directory -f --file --makefile -I --include-dir -j --jobs -l -o -W")
    for directory in scan(args, takes).values("-C", "--directory"):
        checks.location(directory, "make -C directory")


def _find(checks: Checks, name: str, args: list[Word]) -> None:
    i = 0
    while i < len(args) and args[i].value in {"-H", "-L", "-P"}:
        i += 1
    roots: list[Word] = []
    while i < len(args) and (value := args[i].value) is not None and value[:1] not in "-(!":
        roots.append(args[i])
        i += 1
    roots = roots or [Word.literal(".")]
    expression = args[i:]
    j = 0
    while j < len(expression):
        action = expression[j].value
        if action == "-delete":
            for root in roots:
                checks.write(root, "find -delete under")
        elif action in {"-exec", "-execdir", "-ok", "-okdir"}:
            end = next(
                (k for k in range(j + 1, len(expression)) if expression[k].value in {";", "+"}),
                None,
            )
            if end is None:
                checks.deny(f"find {action} without its ';' or '+'")
            for root in roots:  # each file find passes lies under a root
                checks.argv([_found(w, root) for w in expression[j + 1 : end]])
            j = end
        elif action in {"-fprint", "-fprint0", "-fls", "-fprintf"} and j + 1 < len(expression):
            checks.write(expression[j + 1], f"find {action}")
        j += 1


def _found(word: Word, root: Word) -> Word:
    value, root_value = word.value, root.value
    if value is None or "{}" not in value:
        return word
    return STDIN_WORD if root_value is None else Word.literal(value.replace("{}", root_value))


def _rsync(checks: Checks, name: str, args: list[Word]) -> None:
    operands = []
    for word in args:
        value = word.value
        if value is None:
            checks.deny("an rsync argument is only known at run time; it could name a host")
        if value.startswith(("-e", "--rsh", "--rsync-path")):
            checks.deny("rsync with a remote shell reaches another host")
        if value.startswith("-"):
            continue
        if re.match(r"[^/]*:", value):
            checks.deny(f"rsync to or from a remote host ({value!r})")
        operands.append(word)
    moved = any(w.value == "--remove-source-files" for w in args)
    for word in operands if moved else operands[-1:]:
        checks.write(word, "rsync destination")


PATH_RULES: dict[str, Rule] = {
    **dict.fromkeys(("rm", "rmdir", "unlink", "tee"), _operands()),
    "mkfifo": _operands("-m --mode"),
    "touch": _operands("-d --date -r --reference -t"),
    "mkdir": _operands("-m --mode"),
    "truncate": _operands("-s --size -r --reference"),
    "shred": _operands("-n --iterations -s --size --random-source"),
    "mv": _operands("-S --suffix"),
    "ln": _operands("-S --suffix"),
    "cp": _operands("-S --suffix", which="last"),
    "install": _operands(
        "-m --mode -o --owner -g --group -S --suffix", which="last", all_when="-d --directory"
    ),
    "chown": _operands(which="skip_first", all_when="--reference"),
    "chgrp": _operands(which="skip_first", all_when="--reference"),
    "chmod": _chmod,
    "dd": _dd,
    **dict.fromkeys(("sed", "perl", "ruby"), _in_place),
    **dict.fromkeys(("sort", "uniq"), _sort),
    "patch": _patch,
    "tar": _tar,
    "unzip": _unzip,
    "mktemp": _mktemp,
    "find": _find,
    "make": _make,
    "rsync": _rsync,
}
