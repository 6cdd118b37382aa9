"""Documents: a sentence's attention, or a whole text's, as the plain dicts the tool writes as JSON and
draws as tables; their keys are a public contract (docs/reference/json.md)."""
