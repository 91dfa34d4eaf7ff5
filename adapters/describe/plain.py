"""Text from outside (a tracker's title and body, an agent's or a test's failure reason) as a
terminal may print it: no control character gets through (an escape sequence's ESC, a carriage
return, a bell, the C1 controls), so a stranger's issue title cannot set the operator's window
title, clear the screen or write the clipboard (OSC 52) when ``cpe work list``, ``cpe work
show`` or ``cpe status`` prints it. Tabs become spaces; a line break is the caller's to split.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def plain(text: str) -> str:
    """``text`` on one line without control characters (tabs become spaces, line breaks
    are dropped: split the text first to keep them)."""
    return _CONTROL.sub("", text.replace("\t", " "))
