"""Text from someone else shown on a terminal: each character that is not text shows as an escape (issue 61, item 2)."""

from __future__ import annotations

import pytest

from kernel import plain


@pytest.mark.parametrize(
    ("given", "shown"),
    [("\x1b[2J\x1b]0;owned\x07", "\\x1b[2J\\x1b]0;owned\\x07"), ("gnp\u202e.exe", "gnp\\u202e.exe"), ("a\x00b", "a\\x00b"),
     ("line\nfake line\rover", "line\\x0afake line\\x0dover"), ("\u2028\u2066\u200b\x85\x9b", "\\u2028\\u2066\\u200b\\x85\\x9b"),
     ("\U000e0001 tag", "\\U000e0001 tag")],
)  # fmt: skip
def test_control_characters_bidi_overrides_and_line_breaks_show_as_escapes(given, shown):
    assert plain.shown(given) == shown


def test_text_a_person_reads_is_shown_as_it_is():
    text = "Revoked: the baseline → 1.9 times slower — naïve, 日本語, emoji 🙂, tab-free"
    assert plain.shown(text) == text and plain.shown(None) == "None" and plain.shown(5) == "5"


def test_the_first_hidden_character_is_found_unless_it_is_allowed():
    assert plain.first_hidden("fine\n\ttext", allowed="\n\t") is None
    assert plain.first_hidden("fine\x00text", allowed="\n\t") == "\x00"
    assert plain.first_hidden("a\u202eb") == "\u202e"
