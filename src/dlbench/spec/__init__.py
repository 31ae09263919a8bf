"""What is measured: the Case and Settings records and the name tables (plain data).

The lowest layer above errors and measure: every other room reads these, and
they import nothing of dlbench but errors and measure.
"""

from typing import Any, TypeAlias

# A value read from JSON (or a suite's YAML, a server's reply) before the code that
# reads it has checked its shape: arbitrary JSON, so Any to the type checker. The one
# place values go untyped on purpose: each reader checks the parts it uses at run time
# (results.schema, spec.record_dict, plan.validate) and types what it keeps.
JSONValue: TypeAlias = Any
# A JSON object: its keys are strings, its values arbitrary JSON.
JSONObject: TypeAlias = dict[str, JSONValue]
