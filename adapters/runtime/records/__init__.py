"""The record every agent run leaves in ``<state_dir>/runs/<session_id>/``: ``artifacts`` (the
store: transcript, final response, metadata, manifest), ``artifact_files`` (the canonical file
names) and ``native_messages`` (what a runtime's own messages mean for the record)."""
