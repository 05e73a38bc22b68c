"""The one command line of every generator: write its .ptx files into a
folder (the build's, ptx/meson.build; or any, ptx/generate.py), and with
--manifest FILE its kernel manifest (kaio_ptx/manifest.py) as JSON."""

import argparse
import json
import os
import sys

from kaio_ptx import isa, manifest


def write(out_dir, files):
    """Writes each generated file (name -> text) into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    for fname, text in files.items():
        with open(os.path.join(out_dir, fname), "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)


def main(script_path, doc, generate, actions=None, argv=None):
    """A generator's main: script_path is its __file__, doc its docstring,
    generate() returns {file name: text}.  actions maps an extra flag to
    (help, function): given that flag, the function runs instead.  Returns
    the exit status."""
    ap = argparse.ArgumentParser(description=doc.strip().split("\n")[0])
    ap.add_argument("--out-dir", metavar="DIR", help="where the .ptx files are written")
    ap.add_argument("--manifest", metavar="FILE", help="also write the entries' launch facts as JSON")
    for flag, (help_text, _) in (actions or {}).items():
        ap.add_argument(flag, action="store_true", help=help_text)
    args = ap.parse_args(argv)
    for flag, (_, action) in (actions or {}).items():
        if getattr(args, flag.lstrip("-").replace("-", "_")):
            action()
            return 0
    script = os.path.basename(script_path)
    if not args.out_dir and not args.manifest:
        # The PTX is built, not committed: nothing is written beside the generator.
        print("%s: pass --out-dir DIR (python3 ptx/generate.py DIR writes every module)"
              % script, file=sys.stderr)
        return 2
    # .version/.target from each module's instructions, where preamble() left them open
    files = {fname: isa.resolve(text) for fname, text in generate().items()}
    if args.out_dir:
        write(args.out_dir, files)
    if args.manifest:
        family = script[len("gen_"):-len(".py")] if script.startswith("gen_") else script[:-len(".py")]
        with open(args.manifest, "w", encoding="utf-8", newline="\n") as fh:
            json.dump({"generator": "ptx/" + script, "entries": manifest.take(files, family)},
                      fh, indent=1, sort_keys=True)
            fh.write("\n")
    return 0
