"""Synthetic chat conversations for the demo model, rendered by its own chat template.

Each conversation is drawn from a seeded generator: a system prompt, sometimes a list of tools (a few
fixed ones that agent clients send, Bash / shell / Read, and many made-up `verb_noun` tools so the
model learns to copy a name and an argument from the prompt rather than memorise a few), a user turn
that names what it wants, an assistant turn that calls the matching tool in the Hermes format, the
tool's result, and an answer that uses it. Some turns reason between <think> and </think> first;
some conversations have no tools and answer from the Bible. Rendering goes through jinja2 with the
same template that export.py ships, as transformers renders it, so training text is what the daemon
will put in front of the model.

Tokens: bytes 0-255, then <|endoftext|> 256, <|im_start|> 257, <|im_end|> 258.
"""
import json
import os
import random

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

EOT, IM_START, IM_END = 256, 257, 258
SPECIAL = {"<|endoftext|>": EOT, "<|im_start|>": IM_START, "<|im_end|>": IM_END}
TEMPLATE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_template.jinja")


def template_text() -> str:
    with open(TEMPLATE_PATH, encoding="utf-8") as f:
        return f.read()


def environment() -> jinja2.Environment:
    """As transformers compiles chat templates: sandboxed, trim_blocks/lstrip_blocks, its own tojson."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    return env


CITIES = ["Paris", "London", "Tokyo", "Berlin", "Rome", "Cairo", "Lima", "Oslo", "Madrid", "Dublin", "Jerusalem",
          "Boston", "Denver", "Sydney", "Nairobi", "Lisbon", "Vienna", "Prague", "Athens", "Delhi", "Seoul", "Austin"]
WEATHER = ["sunny", "cloudy", "raining", "snowing", "windy", "foggy", "clear", "stormy"]
FILES = ["README.md", "main.py", "src/index.ts", "notes.txt", "package.json", "Makefile", "config.toml", "app.js", "lib/util.go"]
NAMES = ["Ada", "Ben", "Cora", "Dan", "Eve", "Finn", "Gail", "Hugo", "Iris", "Jack", "Kate", "Liam", "Mia", "Noah", "Ruth", "Saul"]
ITEMS = ["apples", "bread", "coffee", "salt", "lamps", "wool", "oil", "figs", "honey", "nails", "paper", "rope"]
BOOKS = ["Genesis", "Exodus", "Psalms", "Proverbs", "John", "Mark", "Luke", "Ruth", "Job", "Isaiah", "Acts", "Romans"]

# Made-up tools: verb phrase (as a user says it), verb in the name, noun, the parameter and its values.
VERBS = [("look up", "lookup"), ("find", "find"), ("get", "get"), ("check", "check"), ("fetch", "fetch"), ("count", "count"),
         ("show", "show"), ("search for", "search"), ("read", "read"), ("list", "list")]
NOUNS = [
    ("price", "item", ITEMS, lambda r: f"{r.randint(1, 99)}.{r.randint(0, 99):02d} dollars"),
    ("stock", "item", ITEMS, lambda r: f"{r.randint(0, 500)} in stock"),
    ("email", "name", NAMES, lambda r: f"{r.choice(NAMES).lower()}@example.com"),
    ("phone", "name", NAMES, lambda r: f"555-{r.randint(1000, 9999)}"),
    ("age", "name", NAMES, lambda r: f"{r.randint(5, 95)} years"),
    ("population", "city", CITIES, lambda r: f"{r.randint(1, 40)}.{r.randint(0, 9)} million"),
    ("time", "city", CITIES, lambda r: f"{r.randint(1, 12)}:{r.randint(0, 59):02d} {r.choice(['am', 'pm'])}"),
    ("verse", "book", BOOKS, lambda r: "In the beginning was the Word, and the Word was with God."),
    ("size", "path", FILES, lambda r: f"{r.randint(1, 900)} KB"),
    ("owner", "path", FILES, lambda r: r.choice(NAMES).lower()),
    ("status", "order", [f"A{n}" for n in range(100, 999, 37)], lambda r: r.choice(["shipped", "pending", "delivered", "lost"])),
    ("score", "team", ["Lions", "Bears", "Hawks", "Owls", "Foxes"], lambda r: f"{r.randint(0, 9)} to {r.randint(0, 9)}"),
]
SYSTEMS = ["You are a helpful assistant.", "You are a helpful assistant. Use the tools when they help.",
           "You are Claude Code, Anthropic's official CLI for Claude.",
           "You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI on a user's computer.",
           "Answer briefly.", "You are Orchard, a small model."]
GREETINGS = [("Hello!", "Hello! How can I help you today?"), ("Hi", "Hi! What can I do for you?"),
             ("Who are you?", "I am a small assistant. I can answer in turns and call tools."),
             ("Thanks!", "You are welcome."), ("Say hi.", "Hi!"), ("How are you?", "I am well, thank you. How can I help?")]


def weather_tool():
    return {"name": "get_weather", "description": "Get the current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}}, "required": ["city"]}}


def add_tool():
    return {"name": "add", "description": "Add two numbers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}


def bash_tool():
    return {"name": "Bash", "description": "Executes a given bash command in a persistent shell session.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command to execute"},
                                                            "timeout": {"type": "number", "description": "Optional timeout in milliseconds"}},
                           "required": ["command"], "additionalProperties": False, "$schema": "http://json-schema.org/draft-07/schema#"}}


def shell_tool():
    return {"name": "shell", "description": "Runs a shell command and returns its output.",
            "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}, "workdir": {"type": "string"},
                                                            "timeout_ms": {"type": "number"}}, "required": ["command"], "additionalProperties": False}}


def read_tool():
    return {"name": "Read", "description": "Reads a file from the local filesystem.",
            "parameters": {"type": "object", "properties": {"file_path": {"type": "string", "description": "The absolute path to the file to read"}},
                           "required": ["file_path"], "additionalProperties": False}}


SHELL_TASKS = [("List the files here.", "ls", "README.md\npackage.json\nsrc", "The files here are README.md, package.json and src."),
               ("Show the git status.", "git status", "On branch main\nnothing to commit, working tree clean", "The working tree is clean on branch main."),
               ("What directory am I in?", "pwd", "/home/user/project", "You are in /home/user/project."),
               ("Show the date.", "date", "Sun Dec  6 12:00:00 UTC 2026", "It is Sun Dec 6 12:00:00 UTC 2026."),
               ("Count the lines in notes.txt.", "wc -l notes.txt", "42 notes.txt", "notes.txt has 42 lines."),
               ("Show the disk usage.", "df -h", "/dev/sda1  50G  20G  30G  40% /", "The disk is 40% full: 30G free."),
               ("Run the tests.", "npm test", "12 passing", "All 12 tests pass."),
               ("Who am I?", "whoami", "user", "You are user.")]


class Gen:
    def __init__(self, seed: int, verses: list[str]):
        self.r = random.Random(seed)
        self.verses = verses

    def made_up_tool(self):
        r = self.r
        said, verb = r.choice(VERBS)
        noun, param, values, result = r.choice(NOUNS)
        spec = {"name": f"{verb}_{noun}", "description": f"{said.capitalize()} the {noun} of a {param}.",
                "parameters": {"type": "object", "properties": {param: {"type": "string"}}, "required": [param]}}
        value = r.choice(values)
        ask = r.choice([f"Please {said} the {noun} of {value}.", f"Can you {said} the {noun} for {value}?",
                        f"{said.capitalize()} the {noun} of {value}.", f"What is the {noun} of {value}? Use {verb}_{noun}."])
        res = result(r)
        answer = r.choice([f"The {noun} of {value} is {res}.", f"{value}: {res}.", f"It is {res}."])
        return spec, {param: value}, ask, json.dumps({noun: res}), answer, f"The user wants the {noun} of {value}. I will call {verb}_{noun}."

    def fixed_task(self):
        r = self.r
        k = r.randrange(5)
        if k == 0:
            city = r.choice(CITIES)
            w, t = r.choice(WEATHER), r.randint(-5, 35)
            ask = r.choice([f"What is the weather in {city}?", f"What's the weather like in {city}?", f"Is it raining in {city}?",
                            f"Tell me the weather in {city}.", f"Use the tool to get the weather in {city}."])
            return (weather_tool(), {"city": city}, ask, json.dumps({"city": city, "weather": w, "temperature": t}),
                    f"It is {w} in {city}, {t} degrees.", f"I should check the weather in {city} with get_weather.")
        if k == 1:
            a, b = r.randint(0, 99), r.randint(0, 99)
            ask = r.choice([f"What is {a} plus {b}?", f"Add {a} and {b}.", f"What is {a} + {b}? Use the add tool."])
            return add_tool(), {"a": a, "b": b}, ask, str(a + b), f"{a} plus {b} is {a + b}.", f"I will add {a} and {b} with the add tool."
        ask, cmd, out, answer = r.choice(SHELL_TASKS)
        if k == 2:
            return bash_tool(), {"command": cmd}, ask, out, answer, f"I can run {cmd} with Bash."
        if k == 3:
            return shell_tool(), {"command": cmd.split(" ")}, ask, out, answer, f"I can run {cmd} in the shell."
        path = "/home/user/" + r.choice(FILES)
        return (read_tool(), {"file_path": path}, f"Read {path}.", self.verse(), "The file says: " + self.verse()[:60],
                f"I will read {path}.")

    def verse(self) -> str:
        return self.r.choice(self.verses)

    def tool_conversation(self) -> dict:
        r = self.r
        task = self.fixed_task() if r.random() < 0.5 else self.made_up_tool()
        spec, args, ask, result, answer, thought = task
        tools = [spec] + [self.made_up_tool()[0] for _ in range(r.choice([0, 0, 1, 1, 2]))]
        names = set()
        tools = [t for t in tools if not (t["name"] in names or names.add(t["name"]))]
        r.shuffle(tools)
        wrapped = [{"type": "function", "function": t} for t in tools]
        messages = []
        if r.random() < 0.8:
            messages.append({"role": "system", "content": r.choice(SYSTEMS)})
        if r.random() < 0.15:
            hi, reply = r.choice(GREETINGS)
            messages += [{"role": "user", "content": hi}, {"role": "assistant", "content": reply}]
        messages.append({"role": "user", "content": ask})
        call = {"role": "assistant", "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": spec["name"], "arguments": args}}]}
        thinking = r.random()
        if thinking < 0.2:
            call["reasoning_content"] = thought
        messages += [call, {"role": "tool", "tool_call_id": "call_1", "content": result}, {"role": "assistant", "content": answer}]
        if r.random() < 0.2:
            messages += [{"role": "user", "content": "Thanks!"}, {"role": "assistant", "content": "You are welcome."}]
        return {"messages": messages, "tools": wrapped}

    def plain_conversation(self) -> dict:
        r = self.r
        messages = []
        if r.random() < 0.6:
            messages.append({"role": "system", "content": r.choice(SYSTEMS)})
        for _ in range(r.choice([1, 1, 2])):
            k = r.random()
            if k < 0.35:
                hi, reply = r.choice(GREETINGS)
                messages += [{"role": "user", "content": hi}, {"role": "assistant", "content": reply}]
            else:
                v = self.verse()
                words = v.split()
                topic = r.choice([w.strip(",.;:") for w in words if len(w) > 4] or ["light"])
                ask = r.choice([f"Tell me a verse about {topic.lower()}.", "Say a verse.", "Quote the Bible.", f"What does the Bible say about {topic.lower()}?",
                                "Continue: " + " ".join(words[:4])])
                msg = {"role": "assistant", "content": v}
                if r.random() < 0.2:
                    msg["reasoning_content"] = f"The user asks about {topic.lower()}. A verse with it will do."
                messages += [{"role": "user", "content": ask}, msg]
        return {"messages": messages, "tools": None}


def encode(text: str) -> list[int]:
    """Bytes, with the three special tokens as single ids (what the daemon's tokenizer does)."""
    out: list[int] = []
    i = 0
    while i < len(text):
        j = text.find("<|", i)
        if j < 0:
            out += text[i:].encode("utf-8")
            break
        out += text[i:j].encode("utf-8")
        for s, tid in SPECIAL.items():
            if text.startswith(s, j):
                out.append(tid)
                i = j + len(s)
                break
        else:
            out += b"<|"
            i = j + 2
    return out


def loss_mask(ids: list[int]) -> list[int]:
    """1 on what the assistant writes (after '<|im_start|>assistant\\n', through its <|im_end|>), else 0."""
    mask = [0] * len(ids)
    head = [IM_START] + list(b"assistant\n")
    i, inside = 0, False
    while i < len(ids):
        if not inside and ids[i:i + len(head)] == head:
            i += len(head)
            inside = True
            continue
        if inside:
            mask[i] = 1
            if ids[i] == IM_END:
                inside = False
        i += 1
    return mask


def conversations(seed: int, n: int, verses: list[str]):
    """(token ids, loss mask) for n rendered conversations, each ending with <|endoftext|>."""
    gen = Gen(seed, verses)
    tmpl = environment().from_string(template_text())
    for _ in range(n):
        conv = gen.tool_conversation() if gen.r.random() < 0.7 else gen.plain_conversation()
        text = tmpl.render(messages=conv["messages"], tools=conv["tools"], add_generation_prompt=False)
        ids = encode(text) + [EOT]
        yield ids, loss_mask(ids)


if __name__ == "__main__":
    import sys
    verses = ["In the beginning God created the heaven and the earth.", "Jesus wept."]
    for ids, mask in conversations(int(sys.argv[1]) if len(sys.argv) > 1 else 1, 3, verses):
        text = bytes(i if i < 256 else 63 for i in ids).decode("utf-8", "replace")
        print(len(ids), sum(mask))
        print("".join(bytes([i]).decode("latin-1") if i < 256 else {256: "<EOT>", 257: "<S>", 258: "<E>"}[i] for i in ids))
