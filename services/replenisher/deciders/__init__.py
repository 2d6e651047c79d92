"""Deciders that talk to a model. The request building and response reading are pure
(`prompt`, `choice`); `claude` is the adapter that sends them through the `anthropic` client."""
