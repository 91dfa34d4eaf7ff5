"""The terminal console, ``cpe tui``: the board, an item, a run's output, the decisions, and
a person's actions, in a terminal (Textual), over a running engine's control socket or a
stopped one's journal."""
