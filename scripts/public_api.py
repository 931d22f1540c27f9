#!/usr/bin/env python3
"""The public API of cryo-core, from its rustdoc output, checked against cryo-core/public-api.txt.

Every public item rustdoc documents (what `cryo_core` exports, however it is re-exported) is
listed with its declaration, every inherent method with its signature, and every trait the item
implements beyond the automatic and blanket ones. A change to any of them fails the check with
the diff until the file is regenerated and the change reviewed with it:

    cargo doc -p cryo-core --no-deps --features datafusion
    python3 scripts/public_api.py             # check
    CRYO_BLESS=1 python3 scripts/public_api.py  # accept the change (commit the file with it)

The documentation directory is found under target/ (target/<triple>/doc when CARGO_BUILD_TARGET
is set, as scripts/test.sh sets it); pass it as the first argument to choose another.
"""

from __future__ import annotations

import difflib
import html
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "cryo-core" / "public-api.txt"


def doc_dir() -> Path:
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    triple = os.environ.get("CARGO_BUILD_TARGET")
    candidates = [target / triple / "doc" / "cryo_core"] if triple else []
    candidates.append(target / "doc" / "cryo_core")
    candidates.extend(sorted(target.glob("*/doc/cryo_core")))
    for c in candidates:
        if (c / "all.html").is_file():
            return c
    sys.exit(f"no rustdoc output for cryo_core under {target}: run cargo doc -p cryo-core first")


def text(fragment: str) -> str:
    """The text of an HTML fragment, on one line."""
    fragment = re.sub(r"<(span|div) class=\"(since|rightside)[^\"]*\".*?</\1>", " ", fragment)
    fragment = re.sub(r"<summary\b.*?</summary>", " ", fragment, flags=re.S)
    fragment = re.sub(r"<(div|br)\b[^>]*>", " ", fragment)
    plain = html.unescape(re.sub(r"<[^>]+>", "", fragment))
    return " ".join(plain.split())


def section(page: str, ident: str) -> str:
    """The part of `page` under the heading with id `ident`, up to the next section heading."""
    start = page.find(f'id="{ident}"')
    if start < 0:
        return ""
    end = page.find('<h2 id="', start + 1)
    return page[start : end if end > 0 else len(page)]


def describe(path: str, page: str) -> list[str]:
    out = []
    decl = re.search(r'<pre class="rust item-decl"><code>(.*?)</code></pre>', page, re.S)
    if decl:
        out.append(f"{path}: {text(decl.group(1))}")
    for header in re.findall(r'<h4 class="code-header">(.*?)</h4>', section(page, "implementations"), re.S):
        out.append(f"{path}: {text(header)}")
    for header in re.findall(r'<h3 class="code-header">(.*?)</h3>', section(page, "trait-implementations"), re.S):
        out.append(f"{path}: {text(header)}")
    # Trait pages: required and provided methods.
    for ident in ("required-methods", "provided-methods", "required-associated-types"):
        for header in re.findall(r'<h4 class="code-header">(.*?)</h4>', section(page, ident), re.S):
            out.append(f"{path}: {text(header)}")
    return out


def api(root: Path) -> list[str]:
    index = (root / "all.html").read_text()
    lines = []
    for href, name in sorted(set(re.findall(r'<a href="([^"]+\.html)">([^<]+)</a>', index))):
        page = (root / href).read_text()
        kind = href.rsplit("/", 1)[-1].split(".", 1)[0]
        lines.append(f"{kind} cryo_core::{name}")
        lines.extend(describe(f"cryo_core::{name}", page))
    return lines


def main() -> int:
    current = api(doc_dir())
    body = "\n".join(current) + "\n"
    if os.environ.get("CRYO_BLESS") == "1":
        SNAPSHOT.write_text(body)
        print(f"wrote {SNAPSHOT.relative_to(ROOT)} ({len(current)} lines)")
        return 0
    expected = SNAPSHOT.read_text() if SNAPSHOT.is_file() else ""
    if body == expected:
        print(f"public API unchanged ({len(current)} lines)")
        return 0
    diff = difflib.unified_diff(expected.splitlines(), current, "cryo-core/public-api.txt", "cargo doc", lineterm="", n=1)
    print("\n".join(diff))
    print(
        "\nThe public API of cryo-core changed. If the change is meant, review it and run\n"
        "    CRYO_BLESS=1 python3 scripts/public_api.py\n"
        "and commit cryo-core/public-api.txt with it."
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
