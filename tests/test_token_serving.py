"""A generation engine as a server under MLPerf LoadGen with token latencies
(worker.token_serving): real engines, real LoadGen, llm-tiny's seeded checkpoint."""

from __future__ import annotations

import importlib.util
import json
import threading

import numpy as np
import pytest
from conftest import cli, dlbench, require_ready

from dlbench.backends.base import GenerationTrace, Generator
from dlbench.backends.serving_engine import GeneratorStreams
from dlbench.errors import CaseError
from dlbench.results.details import Details
from dlbench.worker.loadgen_log import loadgen_outcome
from dlbench.worker.token_check import IDENTICAL, NEAR_TIE
from dlbench.worker.token_sut import TokenQueryServer

# starts a process or imports a framework: not in the fast tier (tests/conftest.py)
pytestmark = pytest.mark.integration

lg = pytest.importorskip("mlperf_loadgen")
SHORT = ("--min-time", "1", "--min-iters", "20", "--warmup", "2", "-t", "1")


def served(tmp_path, framework: str, *args: str) -> dict:
    require_ready(framework)
    out = tmp_path / "run.json"
    done = dlbench("run", "-w", "llm-tiny", "-f", framework, "--scenario", "server", *SHORT,
                   *args, "--json", str(out), timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (result,) = json.loads(out.read_text())["results"]
    assert result["status"] == "ok", result["error"]
    return result


@pytest.mark.slow
def test_continuous_batching_serves_requests_with_loadgens_token_latencies(tmp_path):
    """openvino-genai's continuous batching at a rate: LoadGen judges TTFT and TPOT at
    the SLO percentile, every request's tokens are the reference's, dlbench's own
    token clock agrees with LoadGen's."""
    result = served(tmp_path, "openvino-genai", "--target-qps", "40", "--streams", "4",
                    "--ttft-ms", "5000", "--tpot-ms", "500")  # fmt: skip
    loadgen, generation = result["details"]["loadgen"], result["details"]["generation"]
    assert loadgen["batching"].startswith("continuous batching: up to 4 sequences")
    assert (loadgen["ttft_bound_ms"], loadgen["tpot_bound_ms"], loadgen["percentile"]) == (
        5000, 500, 99)  # fmt: skip
    assert loadgen["perf_constraints_met"] is True and loadgen["errors"] == []
    for key in ("ttft_percentiles_ms", "tpot_percentiles_ms"):
        spread = loadgen[key]
        assert 0 < spread["min"] <= spread["50"] <= spread["99"] <= spread["max"]
    assert loadgen["tokens_per_s"] > 0
    # dlbench's clock starts at the issue callback, LoadGen's at the scheduled arrival:
    # its TTFT is the longer, never by more than the issue's own delay
    assert generation["ttft_p50_ms"] <= loadgen["ttft_percentiles_ms"]["50"] * 1.05
    assert generation["generations"] >= 20 and generation["osl"] == 16
    # every answered request (warm-up too) against the reference, 16 tokens each
    tokens = generation["tokens"]
    assert tokens["verdict"] in (IDENTICAL, NEAR_TIE)
    assert tokens["compared"] == 16 * (generation["generations"] + 3)
    scheduler = result["details"]["extra"]["scheduler"]
    assert scheduler["max_num_seqs"] == 4 and scheduler["enable_prefix_caching"] is False


@pytest.mark.slow
def test_llama_cpps_parallel_slots_serve_requests_in_one_context(tmp_path):
    """llama.cpp's slots, as llama-server runs them: requests share one context's decode
    steps, and every request's tokens are still the reference's."""
    result = served(tmp_path, "llama-cpp", "--target-qps", "40", "--streams", "4",
                    "--ttft-ms", "5000", "--tpot-ms", "500")  # fmt: skip
    loadgen, generation = result["details"]["loadgen"], result["details"]["generation"]
    assert loadgen["batching"].startswith("continuous batching: 4 parallel slots in one context")
    assert loadgen["perf_constraints_met"] is True and loadgen["errors"] == []
    assert result["details"]["extra"]["settings"]["n_seq_max"] == 4
    tokens = generation["tokens"]
    assert tokens["verdict"] in (IDENTICAL, NEAR_TIE)
    assert tokens["compared"] == 16 * (generation["generations"] + 3)
    # at 40 requests/s on one thread, requests overlap: steps held more than one
    assert loadgen["tokens_per_s"] > 0 and generation["generations"] >= 20


@pytest.mark.slow
def test_find_peak_holds_ttft_and_tpot_on_an_engine_serving_a_request_per_stream(tmp_path):
    """onnxruntime-genai serves a request per stream (its Engine batches statically on
    a CPU): two streams, each its own Generator. --find-peak grows the rate, bisects,
    and confirms the peak it keeps."""
    result = served(tmp_path, "onnxruntime-genai", "--find-peak", "--streams", "2",
                    "--ttft-ms", "60", "--tpot-ms", "5")  # fmt: skip
    loadgen = result["details"]["loadgen"]
    assert loadgen["batching"].startswith("2 streams, one request at a time each")
    tries = loadgen["tries"]
    assert len(tries) >= 3
    assert all(t["ttft_percentiles_ms"] and t["tpot_percentiles_ms"] for t in tries)
    held = [t["target_qps"] for t in tries if t["keeps_bound"]]
    missed = [t["target_qps"] for t in tries if not t["keeps_bound"]]
    if loadgen["peak_confirmed"]:
        # the highest rate held below every rate that missed (a rate that held once and
        # missed its confirming try is above the peak), found, then held again
        below_misses = [qps for qps in held if not missed or qps < min(missed)]
        assert loadgen["peak_qps"] == max(below_misses)
        assert [t["target_qps"] for t in tries].count(loadgen["peak_qps"]) >= 2
    else:  # a busy machine: what was found is said, not claimed
        assert loadgen["peak_note"]
    for attempt in tries:  # a try keeps its bounds exactly when LoadGen's percentiles do
        ttft, tpot = attempt["ttft_percentiles_ms"]["99"], attempt["tpot_percentiles_ms"]["99"]
        within = ttft <= 60 and tpot <= 5
        if attempt.get("invalid_reason"):
            # a try LoadGen judged invalid (too few queries: its early-stopping estimate,
            # above the observed percentile, decides) is not held to the observed one
            assert isinstance(attempt["keeps_bound"], bool), attempt
        else:
            assert attempt["keeps_bound"] == within, attempt


class FailingAfterFirstToken(Generator):
    """A generator whose every generation stops with an error after its first token:
    the harness's failure path, with a real LoadGen waiting on the query."""

    device = "cpu"
    details = Details()

    def generate(self, prompt_ids, osl, on_first_token=None) -> GenerationTrace:
        if on_first_token is not None:
            on_first_token()
        raise RuntimeError("engine lost its KV cache")


def test_a_request_that_fails_is_answered_so_loadgen_ends_and_the_case_fails(tmp_path):
    engine = GeneratorStreams([FailingAfterFirstToken()], "cpu", Details())
    server = TokenQueryServer(lg, engine, [[1, 2, 3]], osl=4)
    settings = lg.TestSettings()
    settings.scenario, settings.mode = lg.TestScenario.Server, lg.TestMode.PerformanceOnly
    settings.server_target_qps, settings.use_token_latencies = 50.0, True
    settings.min_duration_ms, settings.min_query_count = 100, 5
    log = lg.LogSettings()
    log.log_output.outdir = str(tmp_path)
    finished = threading.Event()

    def run() -> None:
        lg.StartTestWithLogSettings(server.sut, server.qsl, settings, log,
                                    str(tmp_path / "no-audit.config"))  # fmt: skip
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    assert finished.wait(60), "LoadGen still waits on a failed request"
    server.close()
    with pytest.raises(CaseError, match="a request failed: engine lost its KV cache"):
        server.raise_if_failed()
    outcome = loadgen_outcome(tmp_path / "mlperf_log_detail.txt", "server", 1)
    # answered, and LoadGen logged its token latencies
    assert outcome.ttft_percentiles_ms and outcome.tpot_percentiles_ms


def test_the_queue_of_an_engine_is_served_in_arrival_order_by_its_streams():
    """GeneratorStreams: two streams answer every request submitted, each once."""
    answered: list[int] = []
    done = threading.Event()

    class Echo(Generator):
        device, details = "cpu", Details()

        def generate(self, prompt_ids, osl, on_first_token=None) -> GenerationTrace:
            on_first_token()
            row = [int(t) for t in np.asarray(prompt_ids)[0]][:osl]
            return GenerationTrace(tokens=[row], started_s=0.0, token_times_s=[0.0] * len(row))

    class Sink:
        def first_token(self, request_id: int) -> None:
            return None

        def finished(self, request_id, tokens, token_times_s) -> None:
            answered.append(request_id)
            if len(answered) == 10:
                done.set()

        def failed(self, request_id, error) -> None:
            raise AssertionError(error)

    from dlbench.backends.serving_engine import Request

    engine = GeneratorStreams([Echo(), Echo()], "cpu", Details())
    engine.start(Sink())
    for i in range(10):
        engine.submit(Request(i, [i, i + 1], 2))
    assert done.wait(10)
    engine.close()
    assert sorted(answered) == list(range(10))
    assert "2 streams" in engine.batching


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--loadgen",), "in the server scenario only"),
        (("--scenario", "multi-stream"), "in the server scenario only"),
        (("--loadgen", "--scenario", "offline"), "in the server scenario only"),
        (("--scenario", "server"), "needs --target-qps Q"),
        (("--scenario", "server", "--target-qps", "2", "--latency-bound-ms", "5"),
         "runs the generation-server loop (a generation engine under LoadGen's server scenario, "
         "with token latencies); its load: --target-qps Q or --find-peak, its tokens held to "
         "--ttft-ms and --tpot-ms at --slo-percentile (not a whole query's --latency-bound-ms)"),
        (("--scenario", "server", "--find-peak", "--param", "osl=1"), "at least 2 output tokens"),
        (("--scenario", "server", "--find-peak", "-b", "2"), "a server query is one prompt"),
        (("--scenario", "server", "--find-peak", "--slo-percentile", "42"), "LoadGen; it reports"),
        (("--ttft-ms", "100"), "--scenario server"),
        (("--scenario", "server", "--find-peak", "--ttft-ms", "1e300"), "invalid --ttft-ms"),
        (("-f", "llama-cpp", "--scenario", "server", "--find-peak", "--streams", "300"),
         "on 'llama-cpp'; expected 1 to 256"),
    ],
)  # fmt: skip
def test_bad_generation_server_cases_are_one_line_user_errors(args, message):
    done = cli("run", "--dry-run", "-w", "llm-tiny", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert message in line, line


@pytest.mark.parametrize("bound", ["-5", "'fast'", "1.0e300"])
def test_a_suite_files_bounds_are_checked_as_the_options_are(tmp_path, bound):
    suite = tmp_path / "suite.yaml"
    case = ("workload: llm-tiny", "framework: llama-cpp", "scenario: server",
            "find_peak: true", f"tpot_ms: {bound}")  # fmt: skip
    suite.write_text("name: s\ncases:\n  - " + "\n    ".join(case) + "\n")
    done = cli("run", "--dry-run", str(suite))
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "tpot" in line, line


def test_a_generation_servers_memory_need_grows_with_its_streams():
    """A stream per request holds a model each; a continuous-batching pipeline one model
    and a cache per sequence. 1000 streams of llm-135m (~0.6 GiB each) fit no machine
    that runs these tests; 1000 sequences of llm-tiny in one pipeline fit any."""
    refused = cli("run", "--dry-run", "-w", "llm-135m", "-f", "torch", "--scenario",
                  "server", "--find-peak", "--streams", "1000")  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "served by 1000 streams (a model and its cache each" in line and "--streams" in line
    taken = cli("run", "--dry-run", "-w", "llm-tiny", "-f", "openvino-genai", "--scenario",
                "server", "--find-peak", "--streams", "1000")  # fmt: skip
    assert taken.returncode == 0, taken.stderr


def test_the_cpu_only_engines_are_the_registrys_cpu_only_frameworks():
    """A generation server's default streams read the registry's cpu_only: it names
    exactly the backends that run on the CPU only."""
    from dlbench.backends import load_backend
    from dlbench.backends.base import CpuEngineBackend
    from dlbench.spec.registry import FRAMEWORKS, LLM_WORKLOADS

    checked = []
    for name, info in FRAMEWORKS.items():
        generates = info.support is not None and any(w in LLM_WORKLOADS for w in info.support)
        if generates and info.import_name and importlib.util.find_spec(info.import_name):
            assert info.cpu_only == issubclass(load_backend(name), CpuEngineBackend), name
            checked.append(name)
    assert checked  # at least torch, which the tests install


def test_a_generation_server_takes_mlperfs_llama_bounds_where_none_are_given():
    require_ready("openvino-genai", "llama-cpp", "onnxruntime-genai")
    done = cli("run", "--dry-run", "-w", "llm-tiny", "-f", "openvino-genai", "-f", "llama-cpp",
               "-f", "onnxruntime-genai", "--scenario", "server", "--target-qps", "3",
               "-t", "2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ttft<=2000ms,tpot<=100ms") == 3
    # continuous batching (openvino-genai, llama.cpp's slots) runs up to 32 sequences;
    # onnxruntime-genai a generator per thread (-t 2)
    assert "openvino-genai [default] infer server" in done.stdout
    assert done.stdout.count("streams=32") == 2 and "streams=2" in done.stdout
