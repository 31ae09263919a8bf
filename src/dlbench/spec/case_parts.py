"""The parts of a case that only some cases have, each one record: a Case holds it, or
None. Their fields are written beside the case's own, under the names case files have
always used (spec.record_dict: FLATTENED), so a case's JSON and its key are what they
were; planning builds a case from those flat names (Case.of).

Also the field metadata every part of a case uses: whether a field is part of the
key, and whether a suite entry may set it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlbench.spec import record_dict
from dlbench.spec.cli_options import cli

# Field metadata. "key": False leaves a field out of Case.key() (how it was
# launched, or a path whose content digest is the identity instead); "suite":
# True lets a suite entry set it (plan.suites reads this).
LAUNCH_DETAIL = {"key": False}
SUITE_AXIS = {"suite": True}
# "required": a stored result must carry it: its default would change with
# the reader (threads: the reading machine's CPUs) or silently pick a case.
RECORDED_AXIS = {"suite": True, record_dict.REQUIRED: True}
# "cli" (spec.cli_options.cli): the `dlbench run` option that sets the field;
# the parser and the plan's RunRequest are built from it.


@dataclass(frozen=True)
class UserModel:
    """A user's model file under benchmark (`dlbench run --model`): the file (its
    content digest is the identity), the --input specs (name -> "8x3x32x32:dtype"),
    the trust to unpickle it, and the arrays fed to it (--input-data: an .npz by input
    name, or an .npy, identified by their content digest)."""

    model: str = field(
        metadata=LAUNCH_DETAIL
        | cli(
            "--model",
            group="model",
            help="benchmark a model file on every framework that can run it: ONNX, "
            "TorchScript, torch.export .pt2, Keras .keras/.h5, a SavedModel dir, OpenVINO IR "
            ".xml, TFLite (the format is read from the content, not the extension)",
        ),
    )
    model_digest: str | None = None
    # --input's reader lives with the user-model workload (above this room), so
    # cli.parser declares that option itself
    inputs: tuple[tuple[str, str], ...] = ()
    trust_model: bool = field(
        default=False,
        metadata=LAUNCH_DETAIL
        | cli(
            "--trust-model",
            switch=True,
            group="model",
            help="allow loading a model file that needs unpickling (runs code from the file)",
        ),
    )
    input_data: str | None = field(
        default=None,
        metadata=LAUNCH_DETAIL
        | cli(
            "--input-data",
            metavar="FILE",
            group="model",
            help="the model's input values: an .npz of arrays by input name (a 0-d array for "
            "a scalar), or an .npy for a single-input model; every framework gets the same "
            "values",
        ),
    )
    input_data_digest: str | None = None
