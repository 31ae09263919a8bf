"""The values dlbench leaves untyped on purpose, each named once with its reason.

The lowest layer, beside errors: every room may name these. Anywhere else `Any` is
banned (ruff's TID251, pyproject.toml); a module that still needs it says why on
its import.
"""

from typing import Any, TypeAlias  # noqa: TID251  # the untyped values named below

# A value read from JSON (or a suite's YAML, a server's reply, LoadGen's log) before
# the code that reads it has checked its shape: arbitrary JSON, so Any to the type
# checker. Each reader checks the parts it uses at run time (results.schema,
# spec.record_dict, plan.validate) and types what it keeps.
JSONValue: TypeAlias = Any
# A JSON object: its keys are strings, its values arbitrary JSON.
JSONObject: TypeAlias = dict[str, JSONValue]
# An object of a framework's own (a tensor or array, a model, a session, a compiled
# function, a pipeline), held by code that serves several frameworks or by a
# framework that ships no types (TensorFlow, ONNX Runtime, OpenVINO and their GenAI
# APIs): its class is the framework's, checked by the framework when it is used.
# Where one typed framework's class is known (torch.Tensor, numpy.ndarray), the code
# names it instead.
FrameworkValue: TypeAlias = Any
