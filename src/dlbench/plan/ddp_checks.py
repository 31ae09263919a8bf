"""A DDP case's load (its DdpLaunch: --nproc, --torchrun): training steps under
DistributedDataParallel, launched by torchrun, on a framework whose entry lists the
compile modes it runs them in, one process per GPU or on the CPU."""

from __future__ import annotations

from dlbench.errors import UserError
from dlbench.spec.case import Case
from dlbench.spec.case_parts import DdpLaunch
from dlbench.spec.registry import frameworks_having


def validate_ddp_launch(case: Case, epoch_based: bool, ddp_compiles: tuple[str, ...]) -> None:
    """--nproc N: training steps under DistributedDataParallel, launched by torchrun, on a
    framework whose entry lists the compile modes it runs them in (ddp_compiles)."""
    launch = case.load
    if not isinstance(launch, DdpLaunch):  # its fields on any other case are refused
        return  # where it is made (spec.case.Case.of: spec.loads.FieldsNotTaken)
    nproc = launch.nproc
    if not all(isinstance(arg, str) for arg in launch.torchrun_args):
        raise UserError("torchrun arguments must be strings")
    if any(arg.replace("_", "-").startswith("--nproc-per-node") for arg in launch.torchrun_args):
        raise UserError(
            "--torchrun must not set --nproc-per-node: --nproc is the processes per node"
        )
    if not ddp_compiles or case.mode != "train" or epoch_based:
        raise UserError(
            f"--nproc {nproc} runs {frameworks_having('ddp_compiles')} training steps under "
            "DistributedDataParallel; "
            f"not {case.workload} {case.mode} on {case.framework}"
        )
    if case.compile not in ddp_compiles:
        raise UserError(
            f"--nproc: DistributedDataParallel runs {' or '.join(ddp_compiles)}, not {case.compile}"
        )
    if case.device not in ("cpu", "auto", "cuda"):
        raise UserError(
            f"--nproc {nproc} places one process per GPU (cuda:LOCAL_RANK) or on the CPU; "
            f"give --device cuda, cpu or auto, not {case.device}"
        )
