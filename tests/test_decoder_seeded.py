"""torch's decoder built from the seed on the case's device, its fp32 reference made
there from the same weights: what a GPU case does, run here on the CPU at llm-tiny
with real torch and transformers (backends.torch.decoder.seeded_model)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import installed

from dlbench.backends.base import Job, kv_cache_record
from dlbench.reference.decoder import OWN_REFERENCES, SHARED_REFERENCE
from dlbench.results.env import cpu_model
from dlbench.results.records import STATUS_OK
from dlbench.spec.case import Case, Settings
from dlbench.worker.token_check import IDENTICAL, NEAR_TIE
from dlbench.workloads import get_workload
from dlbench.workloads.decoder import SHAPES, decode_step_bytes

# starts a process or imports a framework: not in the fast tier (tests/conftest.py)
pytestmark = [pytest.mark.integration, installed("transformers")]

torch = pytest.importorskip("torch")

QUICK = Settings(min_time_s=0.0, min_iters=3, warmup_iters=1)


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A cache of this test's own: what a case makes there is its doing."""
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def job(compile_mode: str = "eager", precision: str = "fp32", batch: int = 2) -> Job:
    case = Case("llm-tiny", "torch", compile_mode, device="cpu", batch_size=batch,
                threads=1, precision=precision)  # fmt: skip
    spec = get_workload("llm-tiny")
    return Job(case, spec, "cpu", batch, spec.resolve_params("cpu", {}), seed=0)


def test_the_seeded_weights_are_the_same_every_build_and_a_cast_only_rounds_them():
    from dlbench.backends.torch.decoder import build_decoder

    shape = SHAPES["llm-tiny"]
    first, again = build_decoder(shape, seed=0), build_decoder(shape, seed=0)
    other = build_decoder(shape, seed=1)
    bf16 = build_decoder(shape, seed=0, dtype=torch.bfloat16)
    weights = dict(first.named_parameters())
    assert all(torch.equal(weights[n], p) for n, p in again.named_parameters())
    assert not all(torch.equal(weights[n], p) for n, p in other.named_parameters())
    for name, parameter in bf16.named_parameters():
        assert parameter.dtype == torch.bfloat16
        assert torch.equal(parameter, weights[name].to(torch.bfloat16)), name
    # the rotary frequencies stay fp32, as from_pretrained(dtype=bfloat16) keeps them
    assert {b.dtype for b in bf16.buffers()} == {torch.float32}
    assert not bf16.lm_head.weight[:3].any()  # no special token is ever the largest logit


def test_a_seeded_case_makes_its_reference_once_beside_its_weights_and_is_held_to_it(
    own_cache,
):
    """Eager makes the reference; the reduce-overhead case with the same key loads it,
    compiles its decoding step (transformers' own compilation, asked for on the CPU)
    and gives the same tokens. No checkpoint or tokenizer is made."""
    from dlbench.backends.torch.backend import TorchBackend
    from dlbench.worker.generation import measure_generation

    results = []
    for compile_mode in ("eager", "reduce-overhead"):
        case_job = job(compile_mode)
        generator = TorchBackend().prepare_generation(case_job, seeded=True)
        results.append(measure_generation(generator, case_job, QUICK, setup_s=0.0))
    eager, compiled = results
    for result in results:
        assert result.status == STATUS_OK, result.error
        extra, tokens = result.details.extra, result.details.generation.tokens
        assert extra["weights"] == "seeded on cpu in fp32" and extra["weights_s"] > 0
        assert tokens.verdict == IDENTICAL and tokens.compared == 2 * 16
        assert cpu_model() in tokens.reference and "same seeded weights" in tokens.reference
        assert tokens.reference != SHARED_REFERENCE
    assert eager.details.extra["reference_made_s"] > 0
    assert compiled.details.extra["reference_made_s"] is None  # found in the cache
    assert len(list((own_cache / OWN_REFERENCES).glob("llm-tiny-*.npz"))) == 1
    counters = compiled.details.extra["compile_counters"]
    assert counters["graphs"] >= 1 and counters["graph_breaks"] == 0
    assert "compile_counters" not in eager.details.extra
    assert not checkpoint_folder_made(own_cache)
    # a batch of two shares each step's weight reads: a sequence's share of the bytes
    one = get_workload("llm-tiny").bytes_per_sample({"isl": 32, "osl": 16}, "infer", 4)
    assert eager.bytes_per_sample == pytest.approx(one / 2)
    assert eager.gbps == pytest.approx(eager.throughput * one / 2 / 1e9)
    shape = SHAPES["llm-tiny"]
    step = decode_step_bytes(shape, 2, 32, 16, 4, 4)
    assert eager.details.generation.decode_bytes_per_step == pytest.approx(step)


def checkpoint_folder_made(cache) -> bool:
    """Whether anything of the shared checkpoint is in `cache` (asking for its folder's
    name makes nothing when its parent is not there)."""
    return any(path.name.startswith("llm-tiny-seed") for path in cache.glob("*"))


def test_a_bf16_case_runs_the_seeded_weights_cast_and_is_held_to_their_fp32_reference(
    own_cache,
):
    """The generator a bf16 case gets on a GPU, assembled as prepare_generation does
    but for the precision's hardware check: this CPU may have no bf16 units, and the
    check refuses an emulated speed, not the numbers this test holds."""
    from dlbench.backends.torch.backend import compile_counters
    from dlbench.backends.torch.decoder import TorchGenerator, build_decoder, seeded_model
    from dlbench.worker.generation import measure_generation

    case_job = job(precision="bf16")
    model, reference = seeded_model(case_job, torch.bfloat16)
    fp32 = dict(build_decoder(SHAPES["llm-tiny"], seed=0).named_parameters())
    for name, parameter in model.named_parameters():
        assert torch.equal(parameter, fp32[name].to(torch.bfloat16)), name
    generator = TorchGenerator(case_job, model, torch.bfloat16, "seeded", compile_counters)
    generator.own_reference = reference
    generator.details = replace(generator.details, generation=kv_cache_record(case_job, "bfloat16"))
    result = measure_generation(generator, case_job, QUICK, setup_s=0.0)
    assert result.status == STATUS_OK, result.error
    tokens = result.details.generation.tokens
    assert tokens.verdict in (IDENTICAL, NEAR_TIE), tokens
    assert tokens.reference == reference.origin and reference.made_s is not None
    # the reference is fp32's: its tokens are not the bf16 generation's own
    assert reference.arrays["top1"].dtype.name == "float32"
    step = decode_step_bytes(SHAPES["llm-tiny"], 2, 32, 16, 2, 2)
    assert result.details.generation.decode_bytes_per_step == pytest.approx(step)


def test_only_a_gpu_generation_case_is_seeded_on_its_device():
    from dlbench.backends.torch.decoder import seeds_on_device

    def on(device: str, **case: object) -> Job:
        built = Case.of(workload="llm-tiny", framework="torch", compile="eager", device=device,
                        threads=1, **case)  # fmt: skip
        return Job(built, get_workload("llm-tiny"), device, 1, {"isl": 32, "osl": 16}, 0)

    assert seeds_on_device(on("cuda:0")) and not seeds_on_device(on("cpu"))
    # a LoadGen server is held to the shared reference of its prompts, made apart
    assert not seeds_on_device(on("cuda:0", loadgen=True))


def test_the_device_loop_decodes_the_seeded_model_as_generate_does_its_step_one_graph(
    own_cache,
):
    """dlbench's own decode loop (-c device-loop), as a GPU case runs it (seeded, its
    step compiled whole with CUDA graphs' option), here on the CPU: its tokens are the
    fp32 reference's exactly, one stamp per token after the start, one graph, no break,
    and that graph serves other lengths; a server's first-token call comes once."""
    from dlbench.backends.torch.backend import TorchBackend, compile_counters
    from dlbench.backends.torch.device_loop import DeviceLoopGenerator
    from dlbench.results.details import HOST_STEP_CLOCK
    from dlbench.worker.generation import measure_generation

    before = compile_counters()  # this test process's, other tests' compiles included
    case_job = job("device-loop")
    generator = TorchBackend().prepare_generation(case_job, seeded=True)
    assert isinstance(generator, DeviceLoopGenerator)
    result = measure_generation(generator, case_job, QUICK, setup_s=0.0)
    assert result.status == STATUS_OK, result.error
    generation, extra = result.details.generation, result.details.extra
    assert generation.tokens.verdict == IDENTICAL and generation.tokens.compared == 2 * 16
    assert extra["engine"].startswith("dlbench device loop")
    assert extra["token_clock"] == HOST_STEP_CLOCK
    assert 0 < generation.ttft_p50_ms < generation.e2e_p50_ms
    prompts = case_job.inputs(2)["input_ids"]
    first_token_calls = []
    trace = generator.generate(prompts, 16, on_first_token=lambda: first_token_calls.append(1))
    assert first_token_calls == [1]
    assert len(trace.token_times_s) == 16 and trace.started_s < trace.token_times_s[0]
    assert trace.token_times_s == sorted(trace.token_times_s)
    reference = generator.own_reference.arrays["tokens"]
    assert trace.tokens == reference.tolist()
    # a shorter generation is the same tokens' beginning, by the same compiled step
    assert generator.generate(prompts, 8).tokens == reference[:, :8].tolist()
    assert generator.generate(prompts, 1).tokens == reference[:, :1].tolist()  # prefill only
    counters = generator.after_generations()["compile_counters"]
    assert counters["graphs"] - before["graphs"] == 1, (before, counters)
    assert counters["graph_breaks"] == before["graph_breaks"], (before, counters)


def test_the_device_loop_refuses_what_it_cannot_time_or_interleave():
    """Its token times need a GPU's events or a CPU's synchronous steps; on a GPU it
    queues whole generations, so a server gets one stream of it."""
    from dlbench.backends.torch.backend import TorchBackend
    from dlbench.backends.torch.device_loop import DeviceLoopGenerator
    from dlbench.errors import CaseError

    on_mps = replace(job("device-loop"), device="mps")
    with pytest.raises(CaseError, match="not on 'mps'"):
        DeviceLoopGenerator(on_mps, None, torch.float32, "seeded", dict)  # type: ignore[arg-type]
    on_gpu = replace(job("device-loop"), device="cuda:0")
    with pytest.raises(CaseError, match="serves one stream on cuda:0"):
        TorchBackend().prepare_serving(on_gpu, streams=2)
