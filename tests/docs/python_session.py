"""Run the docs' Python blocks given in a JSON file, in order, in one namespace.

Each block is compiled as its page's own lines, so a traceback names the page and the
line (``File "README.md", line 142``). Started by :mod:`tests.docs.run`.
"""

import json
import sys
from pathlib import Path

namespace = {"__name__": "__main__"}
for block in json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")):
    # the code starts on the line after the opening fence
    source = "\n" * block["line"] + block["code"]
    exec(compile(source, block["page"], "exec"), namespace)
