"""Loading a user's torch model file safely: TorchScript, torch.export, or weights_only.

Nothing here unpickles an untrusted file: TorchScript archives and
torch.export programs rebuild tensors and code from their own formats, and
other torch files load with weights_only=True. What would need full
unpickling is refused with a message naming --trust-model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.backends.base import load_failure, refused
from dlbench.backends.torch.precision import dtype_name
from dlbench.errors import CaseError
from dlbench.spec.model_signature import InputSpec
from dlbench.untyped import FrameworkValue

if TYPE_CHECKING:  # torch is imported where a model is loaded
    import numpy as np
    import torch

# TorchScript argument types dlbench can feed: tensors, and plain numbers
# (called with a Python value from --input-data, not a tensor).
SCALAR_TYPES = {"int": "int64", "float": "float64", "bool": "bool"}


# A ScriptModule, an ExportedProgram or a Module as `kind` says. FrameworkValue, not
# their union: the callers branch on `kind` (a string), which cannot narrow the union
def load_torch_model(path: str, kind: str, trust: bool) -> tuple[FrameworkValue, list[InputSpec]]:
    """(the loaded model, its input signature) for a torchscript, torch-export or
    torch-pickle file. An ExportedProgram comes back as itself (the backend
    decides how to run it); the others as callable modules."""
    import torch

    name = Path(path).name
    version = f"torch {torch.__version__}"
    if kind == "torchscript":
        try:
            module = torch.jit.load(path, map_location="cpu")
        except Exception as exc:
            raise load_failure(f"{version} cannot load TorchScript {name}", exc) from None
        return module, torchscript_signature(module)
    if kind == "torch-export":
        try:
            program = torch.export.load(path)
        except Exception as exc:
            raise load_failure(f"{version} cannot load program {name}", exc) from None
        return program, exported_signature(program)
    module = _unpickled_module(path, trust)
    return module, _python_signature(module)


def _unpickled_module(path: str, trust: bool) -> torch.nn.Module:
    import torch

    name = Path(path).name
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        if "Weights only load failed" not in str(exc):
            raise load_failure(f"cannot read {name} as a torch file", exc) from None
        if not trust:
            why = "it is not TorchScript and needs full unpickling"
            raise refused(name, why) from None
        loaded = torch.load(path, map_location="cpu", weights_only=False)  # the user vouched
    if isinstance(loaded, torch.nn.Module):
        return loaded
    raise CaseError(
        f"{name} holds {type(loaded).__name__}, not a model (weights only?); "
        "save a program with torch.export.save(torch.export.export(model, args), 'model.pt2')"
    )


def torchscript_signature(module: torch.jit.ScriptModule) -> list[InputSpec]:
    """TorchScript records argument names and types but no shapes: tensors need --input."""
    specs = []
    # torch annotates ScriptModule.forward as a plain callable; a loaded program's is a
    # ScriptMethod, which has the schema
    schema = module.forward.schema  # type: ignore[attr-defined]
    for argument in schema.arguments[1:]:  # [0] is self
        type_name = str(argument.type)
        optional = argument.has_default_value()
        if type_name == "Tensor":
            specs.append(InputSpec(argument.name, None, "float32", optional=optional, typed=False))
        elif type_name in SCALAR_TYPES:
            specs.append(
                InputSpec(
                    argument.name, (), SCALAR_TYPES[type_name], scalar=True, optional=optional
                )
            )
        elif optional:
            continue  # e.g. Optional[Tensor] = None: the model's default is used
        else:
            raise CaseError(
                f"TorchScript argument {argument.name!r} is a {type_name}; dlbench feeds "
                "tensors and int/float/bool values"
            )
    return specs


def _python_signature(module: torch.nn.Module) -> list[InputSpec]:
    """A Python module's forward arguments: names only, every one a tensor of unknown shape."""
    import inspect

    parameters = inspect.signature(module.forward).parameters.values()
    return [
        InputSpec(
            p.name,
            None,
            "float32",
            optional=p.default is not inspect.Parameter.empty,
            typed=False,
        )
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def exported_signature(program: torch.export.ExportedProgram) -> list[InputSpec]:
    """The user inputs of an ExportedProgram, with its symbolic dimensions left dynamic."""
    import torch

    user_inputs = set(program.graph_signature.user_inputs)
    specs = []
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            dims = tuple(d if isinstance(d, int) else None for d in value.shape)
            specs.append(InputSpec(node.name, dims, dtype_name(value.dtype)))
        elif isinstance(value, int | float | bool):
            kind = "bool" if isinstance(value, bool) else SCALAR_TYPES[type(value).__name__]
            specs.append(InputSpec(node.name, (), kind, scalar=True))
        else:
            raise CaseError(f"program input {node.name!r} is {type(value).__name__}, not a tensor")
    return specs


def call_arguments(
    signature: Sequence[InputSpec], arrays: dict[str, np.ndarray], device: torch.device
) -> list[object]:
    """Positional arguments for the model: tensors on the device, plain values as Python."""
    import torch

    args = []
    for index, spec in enumerate(signature):
        if spec.name not in arrays:
            # an optional argument left to its default ends the positional call: one
            # given after it would be dropped without a word
            later = [s.name for s in signature[index + 1 :] if s.name in arrays]
            if later:
                raise CaseError(
                    f"input {later[0]!r} comes after {spec.name!r}, which is left to its "
                    f"default; torch models are called positionally: give {spec.name!r} too"
                )
            break
        array = arrays[spec.name]
        args.append(array.item() if spec.scalar else torch.from_numpy(array).to(device))
    return args


def describe(path: str, kind: str, trust: bool) -> tuple[list[InputSpec], list[InputSpec]]:
    """(inputs, outputs) as torch loads the file (for `dlbench inspect`).

    TorchScript records only the return type; a pickled module, nothing.
    """
    loaded, inputs = load_torch_model(path, kind, trust)
    if kind == "torchscript":
        returns = loaded.forward.schema.returns
        return inputs, [InputSpec("return", None, str(r.type)) for r in returns]
    if kind == "torch-export":
        return inputs, _exported_outputs(loaded)
    return inputs, []


def _exported_outputs(program: torch.export.ExportedProgram) -> list[InputSpec]:
    import torch

    node = next(n for n in program.graph.nodes if n.op == "output")
    names = program.graph_signature.user_outputs
    # the output node lists buffer mutations first, then the user's outputs
    values = [getattr(arg, "meta", {}).get("val") for arg in node.args[0][-len(names) :]]
    return [
        InputSpec(name, tuple(d if isinstance(d, int) else None for d in value.shape),
                  dtype_name(value.dtype))
        if isinstance(value, torch.Tensor) else InputSpec(name, None, type(value).__name__)
        for name, value in zip(names, values, strict=True)
    ]  # fmt: skip
