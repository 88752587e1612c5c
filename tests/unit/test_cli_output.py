"""What the command line prints of other people's text."""

from __future__ import annotations

from slurmsched.cli.output import printable


def test_control_characters_in_a_name_reach_no_terminal():
    assert printable("train\x1b]0;pwned\x07\nnext\tline") == "train?]0;pwned??next?line"
    assert printable("名前 🚀 x'; rm -rf / #") == "名前 🚀 x'; rm -rf / #"  # printable text stays as it is
