"""A seeded synthetic corpus in the seven workload categories.

Each category has a generator that returns one document; the same generators,
with another seed, make the prompt suites, so prompts come from the domain the
toy models were trained on.
"""

from __future__ import annotations

import random
from collections.abc import Callable

CATEGORIES = ("code", "translation", "summarization", "chat", "math", "qa", "rag")

_NOUNS = ["cat", "dog", "bird", "house", "river", "tree", "book", "car", "garden", "city", "ship", "lamp"]
_ADJECTIVES = ["red", "small", "old", "green", "quiet", "bright", "cold", "happy", "dark", "tall"]
_VERBS = ["sleeps", "runs", "waits", "sings", "falls", "grows", "shines", "moves", "rests", "turns"]
_FRENCH = {
    "cat": "chat", "dog": "chien", "bird": "oiseau", "house": "maison", "river": "riviere", "tree": "arbre",
    "book": "livre", "car": "voiture", "garden": "jardin", "city": "ville", "ship": "navire", "lamp": "lampe",
    "red": "rouge", "small": "petit", "old": "vieux", "green": "vert", "quiet": "calme", "bright": "clair",
    "cold": "froid", "happy": "heureux", "dark": "sombre", "tall": "grand", "sleeps": "dort", "runs": "court",
    "waits": "attend", "sings": "chante", "falls": "tombe", "grows": "pousse", "shines": "brille",
    "moves": "bouge", "rests": "repose", "turns": "tourne",
}  # fmt: skip
_PLACES = ["Zorland", "Quenta", "Miravel", "Ostrava", "Belcor", "Tindra", "Varnholm", "Elsin"]
_CAPITALS = ["Mirth", "Caldon", "Pellis", "Arvo", "Stennet", "Lumo", "Grist", "Hollen"]
_RIVERS = ["Azel", "Bront", "Cyre", "Dorn", "Emble", "Fask", "Gorra", "Hune"]
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
_FUNCS = ["add", "scale", "shift", "clip", "total", "offset"]


def _code(rng: random.Random) -> str:
    name, a, b = rng.choice(_FUNCS), rng.randint(1, 9), rng.randint(1, 9)
    body = rng.choice([
        f"    return x + {a}\n",
        f"    return x * {a} - {b}\n",
        f"    total = 0\n    for i in range({a}):\n        total += x * i\n    return total\n",
        f"    if x > {a}:\n        return {b}\n    return x\n",
    ])  # fmt: skip
    return f"def {name}_{a}{b}(x):\n{body}\n"


def _sentence(rng: random.Random) -> tuple[str, str]:
    adjective, noun, verb = rng.choice(_ADJECTIVES), rng.choice(_NOUNS), rng.choice(_VERBS)
    english = f"the {adjective} {noun} {verb}"
    french = f"le {_FRENCH[noun]} {_FRENCH[adjective]} {_FRENCH[verb]}"
    return english, french


def _translation(rng: random.Random) -> str:
    english, french = _sentence(rng)
    return f"Translate to French: {english}.\nFrench: {french}.\n\n"


def _summarization(rng: random.Random) -> str:
    noun, adjective, verb = rng.choice(_NOUNS), rng.choice(_ADJECTIVES), rng.choice(_VERBS)
    place = rng.choice(_PLACES)
    text = f"In {place} there is a {adjective} {noun}. Every day the {noun} {verb}. People in {place} like the {noun}."
    return f"Text: {text}\nSummary: the {adjective} {noun} of {place} {verb}.\n\n"


def _chat(rng: random.Random) -> str:
    noun, adjective = rng.choice(_NOUNS), rng.choice(_ADJECTIVES)
    user = rng.choice([f"Tell me about the {noun}.", f"Is the {noun} {adjective}?", "Hello, how are you?"])
    if user.startswith("Hello"):
        reply = "Hello! I am well, thank you. How can I help you today?"
    elif user.startswith("Is"):
        reply = f"Yes, the {noun} is {adjective}. It is a {adjective} {noun}."
    else:
        reply = f"The {noun} is {adjective}. Many people like the {adjective} {noun}."
    return f"<|user|>\n{user}\n<|assistant|>\n{reply}\n"


def _math(rng: random.Random) -> str:
    op = rng.choice(list(_OPS))
    a, b = rng.randint(2, 60), rng.randint(2, 30)
    return f"Q: What is {a} {op} {b}?\nA: {a} {op} {b} = {_OPS[op](a, b)}.\n\n"


def _fact(rng: random.Random) -> tuple[str, str, str]:
    index = rng.randrange(len(_PLACES))
    return _PLACES[index], _CAPITALS[index], _RIVERS[index]


def _qa(rng: random.Random) -> str:
    place, capital, river = _fact(rng)
    if rng.random() < 0.5:
        return f"Q: What is the capital of {place}?\nA: The capital of {place} is {capital}.\n\n"
    return f"Q: Which river flows through {place}?\nA: The {river} river flows through {place}.\n\n"


def _rag(rng: random.Random) -> str:
    place, capital, river = _fact(rng)
    context = f"{capital} is the capital of {place}. The {river} river flows through {capital}."
    return f"Context: {context}\nQuestion: What is the capital of {place}?\nAnswer: {capital}.\n\n"


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "code": _code,
    "translation": _translation,
    "summarization": _summarization,
    "chat": _chat,
    "math": _math,
    "qa": _qa,
    "rag": _rag,
}


def documents(seed: int, count: int) -> list[str]:
    """Return `count` documents drawn evenly from every category, in a seeded order."""
    rng = random.Random(seed)  # noqa: S311 - a seeded corpus, not security
    return [GENERATORS[CATEGORIES[i % len(CATEGORIES)]](rng) for i in range(count)]
