"""The one command line of every generator: write its .ptx files, or with
--check compare them with the committed ones."""

import argparse
import os
import sys


def write_or_check(out_dir, files, check, script):
    """Writes each generated file (name -> text) into out_dir, or with check
    only compares it with the file there; returns the process exit status."""
    stale = []
    for fname, text in files.items():
        path = os.path.join(out_dir, fname)
        if check:
            try:
                with open(path, encoding="utf-8", newline="") as fh:
                    same = fh.read() == text
            except OSError:
                same = False
            if not same:
                stale.append(path)
        else:
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
    for path in stale:
        print("stale: %s (run python3 ptx/%s)" % (os.path.relpath(path), script), file=sys.stderr)
    return 1 if stale else 0


def main(script_path, doc, generate, actions=None, argv=None):
    """A generator's main: script_path is its __file__, doc its docstring,
    generate() returns {file name: text}.  actions maps an extra flag to
    (help, function): given that flag, the function runs instead.  Returns
    the exit status."""
    ap = argparse.ArgumentParser(description=doc.strip().split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed files are stale")
    ap.add_argument("--out-dir", metavar="DIR",
                    help="where the .ptx files are written or checked (default: beside the generator)")
    for flag, (help_text, _) in (actions or {}).items():
        ap.add_argument(flag, action="store_true", help=help_text)
    args = ap.parse_args(argv)
    for flag, (_, action) in (actions or {}).items():
        if getattr(args, flag.lstrip("-").replace("-", "_")):
            action()
            return 0
    here = os.path.dirname(os.path.abspath(script_path))
    return write_or_check(args.out_dir or here, generate(), args.check, os.path.basename(script_path))
