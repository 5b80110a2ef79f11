"""Builds the KJV training corpus from Debian's bible-kjv package.

`bible Gen1:1-Rev22:21` prints chapter headings ("Genesis 1") and verses ("  1 In the ...") wrapped at
80 columns. We keep the headings, drop verse numbers and unwrap each verse onto one line, so the model
learns running text rather than line-wrapping artefacts. Every 20th chapter is held out for validation
(spread across the whole book instead of one tail book, so validation text resembles training text).
"""
import re
import subprocess
import sys

VERSE = re.compile(r"^\s+(\d+) (.*)$")
HEADING = re.compile(r"^[1-3A-Z][A-Za-z ]* \d+$")


def raw_text() -> str:
    return subprocess.run(["bible", "Gen1:1-Rev22:21"], check=True, capture_output=True, text=True).stdout


def chapters(raw: str) -> list[str]:
    out: list[str] = []
    heading = None
    verses: list[str] = []

    def flush() -> None:
        if heading is not None:
            out.append(heading + "\n" + "".join(v + "\n" for v in verses))

    for line in raw.splitlines():
        if not line.strip():
            continue
        m = VERSE.match(line)
        if m:
            verses.append(m.group(2).strip())
        elif HEADING.match(line.strip()) and not line.startswith(" "):
            flush()
            heading, verses = line.strip(), []
        else:  # continuation of a wrapped verse
            verses[-1] += " " + line.strip()
    flush()
    return out


def split(raw: str, every: int = 20) -> tuple[str, str]:
    chs = chapters(raw)
    train = "\n".join(c for i, c in enumerate(chs) if i % every != every - 1)
    valid = "\n".join(c for i, c in enumerate(chs) if i % every == every - 1)
    return train, valid


if __name__ == "__main__":
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "out"
    train, valid = split(raw_text())
    with open(f"{out_dir}/train.txt", "w", encoding="utf-8") as f:
        f.write(train)
    with open(f"{out_dir}/valid.txt", "w", encoding="utf-8") as f:
        f.write(valid)
    print(f"train {len(train.encode())} bytes, valid {len(valid.encode())} bytes")
