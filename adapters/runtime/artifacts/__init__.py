"""The record every agent run leaves in ``<state_dir>/runs/<session_id>/``: ``store`` (the
artifacts: transcript, final response, metadata, manifest), ``files`` (the canonical file
names), ``native_messages`` (what a runtime's own messages mean for the record), ``redaction``
(secrets out of all of it), ``activity`` and ``run_review`` (reading a run back)."""
