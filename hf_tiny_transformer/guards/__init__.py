"""The guards: what keeps every command's promise that a mistake is one line and that nothing a user saved is lost
(docs/design.md lists the modules; each one's docstring says its job)."""
