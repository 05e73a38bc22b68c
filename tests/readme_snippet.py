#!/usr/bin/env python3
"""Writes the C program of README.md's "Using it" section to a file, so that
the tests can compile it with every warning an error and run it: the README's
example cannot rot. A snippet without main() is wrapped in one.

Usage: readme_snippet.py README.md OUT.c
"""
import re
import sys

SECTION = '## Using it'


def snippet(text):
    start = text.find('\n' + SECTION + '\n')
    if start < 0:
        sys.exit(f'readme_snippet.py: README has no "{SECTION}" section')
    block = re.search(r'^```c\n(.*?)^```$', text[start:], re.M | re.S)
    if not block:
        sys.exit(f'readme_snippet.py: the "{SECTION}" section has no ```c block')
    code = block.group(1)
    if not re.search(r'\bint\s+main\s*\(', code):
        includes = ''.join(l + '\n' for l in code.splitlines() if l.startswith('#'))
        body = ''.join('    ' + l + '\n' for l in code.splitlines() if not l.startswith('#'))
        code = f'{includes}\nint main(void) {{\n{body}    return 0;\n}}\n'
    return code


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding='utf-8') as f:
        code = snippet(f.read())
    with open(sys.argv[2], 'w', encoding='utf-8') as f:
        f.write(f'/* Generated from {SECTION!r} of README.md by tests/readme_snippet.py. */\n')
        f.write(code)


if __name__ == '__main__':
    main()
