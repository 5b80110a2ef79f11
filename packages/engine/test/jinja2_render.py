"""Renders chat templates the way transformers does (jinja2, its sandbox, filters and globals), for
comparison with Orchard's renderer. Reads JSON lines {"template": ..., "context": ...} on stdin and
writes one JSON line per input: {"text": ...} or {"error": ...}."""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' override: no HTML escaping, non-ASCII kept.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

for line in sys.stdin:
    job = json.loads(line)
    try:
        out = {"text": env.from_string(job["template"]).render(**job["context"])}
    except Exception as e:  # a template's own refusal is an answer too
        out = {"error": f"{type(e).__name__}: {e}"}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
