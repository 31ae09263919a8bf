"""The endpoint client: dlbench's own client of an OpenAI-compatible server."""
